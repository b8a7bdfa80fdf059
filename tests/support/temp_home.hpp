#pragma once
/// \file SKY_HOME in a fresh temporary directory for one test (the pool ledger, simulated
/// records), restored and removed however the test ends. Header-only.
#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

namespace sky::test {

class TempSkyHome {
public:
    TempSkyHome() {
        char tmpl[] = "/tmp/sky-test-home-XXXXXX";
        if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
        dir_ = tmpl;
        if (const char* s = std::getenv("SKY_HOME")) saved_ = s, had_ = true;
        ::setenv("SKY_HOME", home().c_str(), 1);
    }
    ~TempSkyHome() {
        if (had_)
            ::setenv("SKY_HOME", saved_.c_str(), 1);
        else
            ::unsetenv("SKY_HOME");
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
    }
    TempSkyHome(const TempSkyHome&) = delete;
    TempSkyHome& operator=(const TempSkyHome&) = delete;

    /// The scratch directory (SKY_HOME is its "home" below it).
    [[nodiscard]] const std::filesystem::path& dir() const { return dir_; }
    /// SKY_HOME.
    [[nodiscard]] std::filesystem::path home() const { return dir_ / "home"; }
    /// Where the pool ledgers are.
    [[nodiscard]] std::filesystem::path pools() const { return home() / "pools"; }

private:
    std::filesystem::path dir_;
    std::string saved_;
    bool had_ = false;
};

}  // namespace sky::test
