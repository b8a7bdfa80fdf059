#pragma once
/// \file Rules about a source file's own text (a part that must use no threads, locks or I/O),
/// checked by reading it. Header-only.
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace sky::test {

/// Which of `words` the file at `path` contains. Throws when it cannot be read (a renamed file
/// must not pass for a clean one).
inline std::vector<std::string> mentions(const std::string& path,
                                         std::initializer_list<const char*> words) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot read " + path);
    std::stringstream text;
    text << in.rdbuf();
    std::vector<std::string> found;
    for (const char* w : words)
        if (text.str().find(w) != std::string::npos) found.emplace_back(w);
    return found;
}

}  // namespace sky::test
