#pragma once
// Quoting for POSIX shells: every command sky runs on a node is built with this.
#include <string>
#include <string_view>

namespace sky::detail {

/// `s` as one single-quoted shell word.
inline std::string shell_quote(std::string_view s) {
    std::string out = "'";
    for (char c : s) {
        if (c == '\'')
            out += "'\\''";
        else
            out += c;
    }
    return out + "'";
}

}  // namespace sky::detail
