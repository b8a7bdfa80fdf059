#pragma once
// The function registry: every F used with sky::compute registers itself at static
// initialisation, so client and workers (the same executable) agree on what can be called.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "sky/detail/buffer.hpp"
#include "sky/export.hpp"

SKY_PUBLIC_BEGIN

namespace detail {

/// Decodes the arguments, runs the function, appends the encoded result to `out`.
using Invoker = void (*)(std::span<const std::byte> args, Buffer& out);

struct FunctionEntry {
    std::string_view name;            ///< qualified name, e.g. "stats::mean"
    std::uint64_t signature = 0;      ///< hash of signature_text
    std::string_view signature_text;  ///< e.g. "double(std::vector<double>)"
    Invoker invoke = nullptr;
};

/// Adds an entry (idempotent). Defined in libsky; safe during static initialisation.
bool register_function(const FunctionEntry& entry) noexcept;

/// Result of a lookup by name and signature hash.
struct Lookup {
    const FunctionEntry* entry = nullptr;  ///< null when not found
    bool name_known = false;               ///< the name exists with another signature
};
Lookup find_function(std::string_view name, std::uint64_t signature) noexcept;

/// Every registered entry, sorted by name.
std::vector<FunctionEntry> all_functions();

/// FNV-1a's offset basis: the hash of nothing.
inline constexpr std::uint64_t fnv1a_basis = 1469598103934665603ull;

/// FNV-1a of `s`, continuing from `h` (a hash of bytes before `s`, or a seeded basis): the one
/// copy of the hash for function signatures, build ids and the simulated cloud's prices.
constexpr std::uint64_t fnv1a(std::string_view s, std::uint64_t h = fnv1a_basis) noexcept {
    for (char c : s) {
        h ^= static_cast<unsigned char>(c);
        h *= 1099511628211ull;
    }
    return h;
}

/// "ns::f" from the compiler's pretty name of fn_pretty<F>().
template <auto F>
constexpr std::string_view fn_pretty() noexcept {
    return __PRETTY_FUNCTION__;
}
template <class T>
constexpr std::string_view type_pretty() noexcept {
    return __PRETTY_FUNCTION__;
}

constexpr std::string_view between(std::string_view s, std::string_view open) noexcept {
    auto b = s.find(open);
    if (b == std::string_view::npos) return s;
    b += open.size();
    // GCC: "[with auto F = ns::f; ...]"; Clang: "[F = &ns::f]".
    auto e = s.find_first_of(";]", b);
    auto r = s.substr(b, e == std::string_view::npos ? std::string_view::npos : e - b);
    while (!r.empty() && (r.front() == '&' || r.front() == ' ')) r.remove_prefix(1);
    return r;
}

template <auto F>
constexpr std::string_view function_name() noexcept {
    return between(fn_pretty<F>(), "F = ");
}
template <class T>
constexpr std::string_view type_name() noexcept {
    return between(type_pretty<T>(), "T = ");
}

}  // namespace detail

SKY_PUBLIC_END
