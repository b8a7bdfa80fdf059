#pragma once
/// \file sky::class_version: the class version sky's archives give a type (docs/concepts.md).
#include <cstdint>

#include "sky/export.hpp"

SKY_PUBLIC_BEGIN

/// The version that sky's archives write once per message before a type's first value and pass
/// to its versioned serialize, save or load (`serialize(Archive& ar, const std::uint32_t
/// version)`): 0 unless the program specializes it, as in
/// `template <> inline constexpr std::uint32_t sky::class_version<Row> = 2;`. It is sky's own:
/// cereal's CEREAL_CLASS_VERSION sets the version of cereal's archives, which sky's do not read
/// (a type that travels both ways sets both).
template <class T>
inline constexpr std::uint32_t class_version = 0;

SKY_PUBLIC_END
