#pragma once
// Reading the process environment (not public API).
#include <cstdlib>
#include <string>
#include <string_view>

namespace sky::detail {

/// The variable's value, or `fallback` when it is unset or empty (an empty value means "not
/// set" everywhere sky reads one).
inline std::string env_or(const char* name, std::string_view fallback = {}) {
    const char* v = std::getenv(name);
    return v && *v ? std::string(v) : std::string(fallback);
}

/// `rel` under the user's home directory ($HOME, else /root: what a root-run service has).
inline std::string home_path(std::string_view rel) {
    return env_or("HOME", "/root") + "/" + std::string(rel);
}

}  // namespace sky::detail
