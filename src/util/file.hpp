#pragma once
// Reading a whole file (not public API); files whose owner decides what sky may do are read by
// private_files.hpp's read_private_file instead.
#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

namespace sky::detail {

/// The bytes of `path` (at most `max_bytes` of them), or none when it cannot be opened or read.
inline std::optional<std::string> read_file(const std::filesystem::path& path,
                                            std::size_t max_bytes = static_cast<std::size_t>(-1)) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return std::nullopt;
    std::string out;
    char buf[16384];
    while (out.size() < max_bytes) {
        const auto want =
            static_cast<std::streamsize>(std::min(sizeof buf, max_bytes - out.size()));
        in.read(buf, want);
        out.append(buf, static_cast<std::size_t>(in.gcount()));
        if (in.gcount() < want) break;
    }
    if (in.bad()) return std::nullopt;
    return out;
}

}  // namespace sky::detail
