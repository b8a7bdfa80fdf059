#pragma once
// cereal binary serialization into sky::detail::Buffer, and the concept that names what can travel.
#include <istream>
#include <ostream>
#include <span>
#include <type_traits>

#include <cereal/archives/binary.hpp>
#include <cereal/types/array.hpp>
#include <cereal/types/chrono.hpp>
#include <cereal/types/complex.hpp>
#include <cereal/types/deque.hpp>
#include <cereal/types/list.hpp>
#include <cereal/types/map.hpp>
#include <cereal/types/memory.hpp>
#include <cereal/types/optional.hpp>
#include <cereal/types/set.hpp>
#include <cereal/types/string.hpp>
#include <cereal/types/tuple.hpp>
#include <cereal/types/unordered_map.hpp>
#include <cereal/types/unordered_set.hpp>
#include <cereal/types/utility.hpp>
#include <cereal/types/variant.hpp>
#include <cereal/types/vector.hpp>

#include "sky/detail/buffer.hpp"

namespace sky {

/// A type that can be an argument or a result of a remote function: cereal can save and load it.
template <class T>
concept serializable =
    std::is_same_v<T, void> ||
    (cereal::traits::is_output_serializable<T, cereal::BinaryOutputArchive>::value &&
     cereal::traits::is_input_serializable<T, cereal::BinaryInputArchive>::value &&
     std::is_default_constructible_v<T>);

namespace detail {

/// Appends the cereal binary form of each value to `out`.
template <class... Ts>
void save_to(Buffer& out, const Ts&... values) {
    BufferWriter sb(out);
    std::ostream os(&sb);
    cereal::BinaryOutputArchive ar(os);
    ar(values...);
}

/// Reads values saved by save_to; throws cereal::Exception when the bytes run out.
template <class... Ts>
void load_from(std::span<const std::byte> bytes, Ts&... values) {
    SpanReader sb(bytes);
    std::istream is(&sb);
    cereal::BinaryInputArchive ar(is);
    ar(values...);
}

}  // namespace detail
}  // namespace sky
