#pragma once
/// \file Environment variables set for a scope (a cloud's credentials in a test) and unset after
/// it. Header-only: unit tests use it without linking any test-support library.
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace sky::test {

class ScopedEnv {
public:
    explicit ScopedEnv(std::vector<std::pair<std::string, std::string>> vars)
        : vars_(std::move(vars)) {
        for (const auto& [name, value] : vars_) ::setenv(name.c_str(), value.c_str(), 1);
    }
    ~ScopedEnv() {
        for (const auto& [name, value] : vars_) ::unsetenv(name.c_str());
    }
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;

private:
    std::vector<std::pair<std::string, std::string>> vars_;
};

}  // namespace sky::test
