#pragma once
// Reading the few facts sky needs from an ELF file without scanning it: the glibc symbol versions
// it requires come from its version-needs section (.gnu.version_r), found through the section
// headers. Only headers and that section are read, whatever the file's size.
#include <filesystem>
#include <optional>

namespace sky::detail::ship {

/// A glibc version, e.g. {2, 34}.
struct GlibcVersion {
    int major = 0;
    int minor = 0;
    friend auto operator<=>(const GlibcVersion&, const GlibcVersion&) = default;
};

/// The newest GLIBC_x.y version the file's dynamic symbols need; nullopt when it needs none or is
/// not a 64-bit ELF file. Throws std::runtime_error naming the file when it is truncated or its
/// tables point outside it.
std::optional<GlibcVersion> glibc_needed(const std::filesystem::path& file);

}  // namespace sky::detail::ship
