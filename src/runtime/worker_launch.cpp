#include "runtime/worker_launch.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <sys/un.h>

#include <charconv>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "sky/errors.hpp"
#include "util/shell.hpp"

namespace sky::detail {

namespace {

constexpr const char* fd_var = "SKY_WORKER_FD";
constexpr const char* listen_var = "SKY_WORKER_LISTEN";
constexpr const char* token_var = "SKY_WORKER_TOKEN";
constexpr const char* token_file_var = "SKY_WORKER_TOKEN_FILE";
constexpr const char* port_file_var = "SKY_WORKER_PORT_FILE";
constexpr const char* heartbeat_file_var = "SKY_WORKER_HEARTBEAT_FILE";
constexpr const char* ready_fd_var = "SKY_WORKER_READY_FD";
constexpr const char* accept_timeout_var = "SKY_WORKER_ACCEPT_TIMEOUT";
constexpr const char* crash_file_var = "SKY_WORKER_CRASH_FILE";
constexpr const char* notice_file_var = "SKY_WORKER_NOTICE_FILE";
constexpr const char* allow_from_var = "SKY_WORKER_ALLOW_FROM";
constexpr const char* seal_var = "SKY_WORKER_SEAL";
constexpr const char* parent_pid_var = "SKY_PARENT_PID";
constexpr const char* parent_pool_var = "SKY_PARENT_POOL";

// A value as an error message shows it: quoted, cut, control characters as '?'.
std::string shown(std::string_view v) {
    std::string out = "'";
    for (char c : v.substr(0, 80))
        out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
    return out + (v.size() > 80 ? "...'" : "'");
}

[[noreturn]] void malformed(const char* name, std::string_view value, std::string_view want) {
    throw ConfigError(std::string(name) + "=" + shown(value) + " is not " + std::string(want));
}

// A whole decimal number in [lo, hi], nothing else.
long long whole_number(const char* name, std::string_view v, long long lo, long long hi,
                       std::string_view want) {
    long long n = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (v.empty() || ec != std::errc() || end != v.data() + v.size() || n < lo || n > hi)
        malformed(name, v, want);
    return n;
}

void check_listen(std::string_view v) {
    if (v.rfind("unix:", 0) == 0) {
        const std::string_view path = v.substr(5);
        if (path.empty() || path.front() != '/' || path.size() >= sizeof(sockaddr_un{}.sun_path))
            malformed(listen_var, v,
                      "unix:PATH with an absolute PATH shorter than " +
                          std::to_string(sizeof(sockaddr_un{}.sun_path)) + " bytes");
        return;
    }
    const auto colon = v.rfind(':');
    if (colon == std::string_view::npos || colon == 0)
        malformed(listen_var, v, "HOST:PORT or unix:PATH");
    whole_number(listen_var, v.substr(colon + 1), 0, 65535,
                 "HOST:PORT with a port from 0 to 65535");
}

}  // namespace

std::vector<std::string> WorkerLaunch::env() const {
    std::vector<std::string> out;
    auto add = [&](const char* name, const std::string& value) {
        if (!value.empty()) out.push_back(std::string(name) + "=" + value);
    };
    if (fd) add(fd_var, std::to_string(*fd));
    add(listen_var, listen);
    add(token_var, token);
    add(token_file_var, token_file);
    add(port_file_var, port_file);
    add(heartbeat_file_var, heartbeat_file);
    if (ready_fd) add(ready_fd_var, std::to_string(*ready_fd));
    if (accept_timeout) add(accept_timeout_var, std::to_string(accept_timeout->count()));
    add(crash_file_var, crash_file);
    add(notice_file_var, notice_file);
    add(allow_from_var, allow_from);
    if (seal) add(seal_var, "1");
    if (parent_pid > 0) add(parent_pid_var, std::to_string(parent_pid));
    add(parent_pool_var, parent_pool);
    return out;
}

std::string WorkerLaunch::shell_exports() const {
    if (!token.empty())
        throw std::logic_error(
            "WorkerLaunch: a token goes to the worker in a file, never in a script");
    std::string line;
    for (const auto& entry : env()) {
        const auto eq = entry.find('=');
        line += (line.empty() ? "export " : " ") + entry.substr(0, eq + 1) +
                shell_quote(std::string_view(entry).substr(eq + 1));
    }
    return line.empty() ? line : line + "\n";
}

WorkerLaunch WorkerLaunch::from_env() {
    return from_env([](const char* name) -> const char* { return std::getenv(name); });
}

WorkerLaunch WorkerLaunch::from_env(const std::function<const char*(const char*)>& lookup) {
    auto get = [&](const char* name) -> std::string_view {
        const char* v = lookup(name);
        return v ? std::string_view(v) : std::string_view();
    };
    WorkerLaunch l;
    if (auto v = get(fd_var); !v.empty())
        l.fd = static_cast<int>(whole_number(fd_var, v, 0, std::numeric_limits<int>::max(),
                                             "a file descriptor (a whole number from 0)"));
    if (auto v = get(listen_var); !v.empty()) {
        check_listen(v);
        l.listen = v;
    }
    l.token = get(token_var);
    l.token_file = get(token_file_var);
    l.port_file = get(port_file_var);
    l.heartbeat_file = get(heartbeat_file_var);
    if (auto v = get(ready_fd_var); !v.empty())
        l.ready_fd =
            static_cast<int>(whole_number(ready_fd_var, v, 0, std::numeric_limits<int>::max(),
                                          "a file descriptor (a whole number from 0)"));
    l.crash_file = get(crash_file_var);
    l.notice_file = get(notice_file_var);
    if (auto v = get(allow_from_var); !v.empty()) {
        in6_addr a{};
        const std::string text(v);
        if (::inet_pton(AF_INET, text.c_str(), &a) != 1 &&
            ::inet_pton(AF_INET6, text.c_str(), &a) != 1)
            malformed(allow_from_var, v, "an IPv4 or IPv6 address");
        l.allow_from = text;
    }
    if (auto v = get(seal_var); !v.empty()) {
        if (v != "1" && v != "0") malformed(seal_var, v, "1 or 0");
        l.seal = v == "1";
    }
    if (auto v = get(accept_timeout_var); !v.empty())
        l.accept_timeout = std::chrono::seconds(whole_number(
            accept_timeout_var, v, 1, 365LL * 24 * 3600, "a number of seconds from 1"));
    if (auto v = get(parent_pid_var); !v.empty())
        l.parent_pid = static_cast<long>(whole_number(
            parent_pid_var, v, 1, std::numeric_limits<int>::max(), "a process id (from 1)"));
    l.parent_pool = get(parent_pool_var);
    return l;
}

void WorkerLaunch::check_complete() const {
    if ((!fd && listen.empty()) || (token.empty() && token_file.empty()))
        throw ConfigError(std::string("a worker needs ") + token_var + " or " + token_file_var +
                          ", and " + fd_var + " or " + listen_var +
                          " (a sky pool starts its workers with them)");
}

std::string WorkerLaunch::parent_pool_entry(std::string_view pool_id) {
    return std::string(parent_pool_var) + "=" + std::string(pool_id);
}

bool WorkerLaunch::is_launch_variable(std::string_view entry) noexcept {
    const std::string_view name = entry.substr(0, entry.find('='));
    return name.rfind("SKY_WORKER_", 0) == 0 || name == parent_pid_var || name == parent_pool_var;
}

void WorkerLaunch::erase_token_from_env() noexcept {
    if (char* v = std::getenv(token_var)) OPENSSL_cleanse(v, std::strlen(v));
    ::unsetenv(token_var);
    ::unsetenv(token_file_var);
}

}  // namespace sky::detail
