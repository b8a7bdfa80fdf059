#pragma once
// Shared by the fuzz targets: what counts as an expected outcome for hostile input, and how a
// finding is reported. libFuzzer (SKY_FUZZ=ON) and the replay main (normal builds) both treat an
// abort as a failure, so every finding ends in one.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>
#include <typeinfo>

#include "sky/errors.hpp"

namespace sky::fuzz {

/// Reports a finding and aborts (libFuzzer saves the input; the replay test fails).
[[noreturn]] inline void finding(std::string_view what) {
    std::fprintf(stderr, "FUZZ FINDING: %.*s\n", static_cast<int>(what.size()), what.data());
    std::abort();
}

/// Aborts unless `ok`: an invariant the library documents did not hold.
inline void check(bool ok, std::string_view what) {
    if (!ok) finding(what);
}

/// Runs `f` on hostile input: returning or throwing sky::Error (and, where `Also` names one, that
/// documented exception type too) is the expected outcome; any other exception is a finding.
template <class... Also, class F>
void expect_typed(F&& f) {
    try {
        f();
    } catch (const sky::Error&) {
    } catch (const std::exception& e) {
        if ((... || (dynamic_cast<const Also*>(&e) != nullptr))) return;
        finding(std::string("unexpected exception ") + typeid(e).name() + ": " + e.what());
    } catch (...) {
        finding("an exception that is not a std::exception");
    }
}

/// The input as text.
inline std::string_view text(const std::uint8_t* data, std::size_t size) {
    return {reinterpret_cast<const char*>(data), size};
}

}  // namespace sky::fuzz
