#pragma once
/// \file This process's stderr (fd 2) sent to a temporary file for a scope, and read back: what a
/// user would see on the terminal. Header-only.
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

namespace sky::test {

class CapturedStderr {
public:
    CapturedStderr() {
        char tmpl[] = "/tmp/sky-test-stderr-XXXXXX";
        fd_ = ::mkstemp(tmpl);
        if (fd_ < 0) throw std::runtime_error("mkstemp failed");
        path_ = tmpl;
        std::fflush(stderr);
        saved_ = ::dup(2);
        ::dup2(fd_, 2);
    }
    ~CapturedStderr() {
        restore();
        ::close(fd_);
        ::unlink(path_.c_str());
    }
    CapturedStderr(const CapturedStderr&) = delete;
    CapturedStderr& operator=(const CapturedStderr&) = delete;

    /// Puts stderr back (also done by the destructor) and returns everything written meanwhile.
    std::string text() {
        restore();
        std::ifstream in(path_, std::ios::binary);
        return {std::istreambuf_iterator<char>(in), {}};
    }

private:
    void restore() {
        if (saved_ < 0) return;
        std::fflush(stderr);
        ::dup2(saved_, 2);
        ::close(saved_);
        saved_ = -1;
    }
    int fd_ = -1;
    int saved_ = -1;
    std::string path_;
};

/// How often `needle` occurs in `text`.
inline int occurrences(const std::string& text, const std::string& needle) {
    int n = 0;
    for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
    return n;
}

}  // namespace sky::test
