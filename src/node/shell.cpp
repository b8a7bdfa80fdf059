#include "node/shell.hpp"

#include <fmt/format.h>

#include <cstring>
#include <sstream>
#include <stdexcept>

#include "util/shell.hpp"
#include "util/text.hpp"

namespace sky::detail::node {

std::string CommandOutcome::summary() const {
    if (timed_out) return "it timed out";
    std::string last;
    std::istringstream is(err.empty() ? out : err);
    for (std::string l; std::getline(is, l);)
        if (!trim(l).empty()) last = std::string(trim(l));
    if (last.size() > 400) last = last.substr(0, 400) + "...";
    return last.empty() ? fmt::format("exit status {}", status)
                        : fmt::format("exit status {}: {}", status, last);
}

std::vector<std::string> CommandOutcome::last_lines(std::size_t n) const {
    std::vector<std::string> lines;
    for (const std::string* s : {&out, &err}) {
        std::istringstream is(*s);
        for (std::string l; std::getline(is, l);) lines.push_back(std::move(l));
    }
    if (lines.size() > n) lines.erase(lines.begin(), lines.end() - static_cast<std::ptrdiff_t>(n));
    return lines;
}

void NodeShell::put(std::string_view content, const std::string& path, int mode) {
    std::size_t at = 0;
    upload(
        [&](std::byte* b, std::size_t n) {
            const std::size_t k = std::min(n, content.size() - at);
            std::memcpy(b, content.data() + at, k);
            at += k;
            return k;
        },
        path, mode);
}

std::unique_ptr<io::Stream> NodeShell::open_unix_socket(const std::string& path,
                                                        std::chrono::milliseconds timeout) {
    (void)timeout;
    throw std::logic_error(describe() + ": no way to reach the Unix socket " + path);
}

void NodeShell::hold(const std::vector<std::string>& argv) {
    (void)argv;
    throw std::logic_error(describe() + ": no connection to hold a command on");
}

std::string shell_command(const std::vector<std::string>& argv) {
    std::string command;
    for (const auto& a : argv) command += (command.empty() ? "" : " ") + shell_quote(a);
    return command;
}

}  // namespace sky::detail::node
