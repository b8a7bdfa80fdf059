#pragma once
/// \file Registers one Catch2 test case per data-driven case (a test folder, a protocol case id, a
/// fixture file), found at start-up by reading the test data, so each passes or fails on its own.
#include <catch2/catch.hpp>
#include <functional>
#include <string>
#include <utility>

namespace sky::test {

class FunctionInvoker : public Catch::ITestInvoker {
public:
    explicit FunctionInvoker(std::function<void()> body) : body_(std::move(body)) {}
    void invoke() const override { body_(); }

private:
    std::function<void()> body_;
};

/// Registers a test case; call from a static initialiser (before Catch's session starts).
inline void register_test(const std::string& name, const std::string& tags,
                          std::function<void()> body) {
    // Catch copies the name and tags; the invoker lives for the whole run, as Catch expects.
    Catch::AutoReg(new FunctionInvoker(std::move(body)), Catch::SourceLineInfo(__FILE__, __LINE__),
                   Catch::StringRef(), Catch::NameAndTags{name.c_str(), tags.c_str()});
}

}  // namespace sky::test
