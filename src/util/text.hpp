#pragma once
// ASCII text helpers shared by every component (not public API).
#include <cxxabi.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <typeinfo>
#include <vector>

namespace sky::detail {

/// The readable name of a mangled type name (`typeid(e).name()`), or the name as it is.
inline std::string demangle(const char* name) {
    int status = 0;
    std::unique_ptr<char, void (*)(void*)> d(abi::__cxa_demangle(name, nullptr, nullptr, &status),
                                             std::free);
    return status == 0 && d ? std::string(d.get()) : std::string(name);
}

/// The exception in flight, as a caller that rethrows it elsewhere reports it.
struct ExceptionDescription {
    std::string type_name;  ///< its dynamic type, demangled ("unknown" when not to be had)
    std::string message;    ///< what(), or a sentence saying it is not a std::exception
};

/// Describes the exception being handled; call it inside a catch block only.
inline ExceptionDescription current_exception_description() {
    try {
        throw;
    } catch (const std::exception& e) {
        return {demangle(typeid(e).name()), e.what()};
    } catch (...) {
        const std::type_info* t = abi::__cxa_current_exception_type();
        return {t ? demangle(t->name()) : "unknown", "an exception that is not a std::exception"};
    }
}

/// ASCII lower-case copy.
inline std::string to_lower(std::string_view s) {
    std::string out(s);
    std::transform(out.begin(), out.end(), out.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return out;
}

/// ASCII upper-case copy.
inline std::string to_upper(std::string_view s) {
    std::string out(s);
    std::transform(out.begin(), out.end(), out.begin(),
                   [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    return out;
}

/// `s` without leading and trailing whitespace (a view into `s`: keep `s` alive).
inline std::string_view trim(std::string_view s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
    return s;
}

/// ASCII case-insensitive equality.
inline bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() &&
           std::equal(a.begin(), a.end(), b.begin(), [](unsigned char x, unsigned char y) {
               return std::tolower(x) == std::tolower(y);
           });
}

/// `items` joined by `sep`; past the first `max` of them, " +N more" stands for the rest (a
/// message stays readable whatever a cloud returns).
inline std::string join(const std::vector<std::string>& items, std::string_view sep = ", ",
                        std::size_t max = static_cast<std::size_t>(-1)) {
    std::string s;
    for (std::size_t i = 0; i < items.size() && i < max; ++i) {
        if (i) s += sep;
        s += items[i];
    }
    if (items.size() > max) s += " +" + std::to_string(items.size() - max) + " more";
    return s;
}

}  // namespace sky::detail
