#pragma once
// Where a remote worker waits for its client: a listening socket, "unix:/absolute/path" (0600,
// in a directory the caller made 0700) or "HOST:PORT" (IPv4; remote workers listen on 127.0.0.1
// only), and the authentication of whoever connects.
#include <chrono>
#include <string>
#include <string_view>

namespace sky::detail {

class Listener {
public:
    /// Listens on `where`; valid() is false, with a message on stderr, when it cannot.
    /// `allow_from` (an IP address, or empty for any): the only peer address accepted.
    explicit Listener(const std::string& where, std::string allow_from = {});
    /// Closes the socket and removes a Unix socket's file.
    ~Listener();
    Listener(const Listener&) = delete;
    Listener& operator=(const Listener&) = delete;

    [[nodiscard]] bool valid() const noexcept { return fd_ >= 0; }
    /// What the port file gets: the port, or "unix".
    [[nodiscard]] const std::string& port_text() const noexcept { return port_text_; }
    /// Writes port_text() to `path`, whole (renamed into place): a reader never sees a partial
    /// file, and a non-empty file means the worker is listening.
    void write_port_file(const std::string& path) const;
    /// Writes port_text() and a newline to the pipe `fd` (the launcher's), then closes it.
    void write_port_to(int fd) const;
    /// Accepts until one peer proves it holds `token` (runtime/auth.hpp): a squatter is dropped,
    /// not served, and cannot keep the client out. Each peer gets 10 s to answer the challenge.
    /// Returns the authenticated descriptor, or -1 when `deadline` passed first.
    int accept_authenticated(std::string_view token,
                             std::chrono::steady_clock::time_point deadline);
    /// Closes the socket and removes its file (a worker that will not accept again).
    void close() noexcept;

private:
    int fd_ = -1;
    std::string unix_path_;
    std::string port_text_;
    std::string allow_from_;
};

}  // namespace sky::detail
