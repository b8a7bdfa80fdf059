#pragma once
// Where a remote worker waits for its client: a listening socket, "unix:/absolute/path" (0600,
// in a directory the caller made 0700) or "HOST:PORT" (IPv4; remote workers listen on 127.0.0.1
// only), and the authentication of whoever connects.
#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "io/sealed.hpp"

namespace sky::detail {

class Listener {
public:
    /// Listens on `where`; valid() is false, with a message on stderr, when it cannot.
    /// `allow_from` (an IP address, or empty for any): the only peer address accepted.
    /// `seal`: every connection's stream is sealed (runtime/auth.hpp); a client that does not
    /// seal is refused.
    explicit Listener(const std::string& where, std::string allow_from = {}, bool seal = false);
    /// Closes the socket and removes a Unix socket's file.
    ~Listener();
    Listener(const Listener&) = delete;
    Listener& operator=(const Listener&) = delete;

    [[nodiscard]] bool valid() const noexcept { return fd_ >= 0; }
    /// What the port file gets: the port, or "unix".
    [[nodiscard]] const std::string& port_text() const noexcept { return port_text_; }
    /// Writes port_text() to `path`, whole (renamed into place): a reader never sees a partial
    /// file, and a non-empty file means the worker is listening. `extra` (a public key) follows
    /// the port on the same line.
    void write_port_file(const std::string& path, std::string_view extra = {}) const;
    /// Writes the same line and a newline to the pipe `fd` (the launcher's), then closes it.
    void write_port_to(int fd, std::string_view extra = {}) const;
    /// Accepts until one peer proves it holds `token` (runtime/auth.hpp): a squatter is dropped,
    /// not served, and cannot keep the client out. Each peer gets 10 s to answer the challenge.
    /// Returns the authenticated descriptor, or -1 when `deadline` passed first. A sealing
    /// listener's `keys` get the connection's keys.
    /// `wake_fd` (an eventfd, or -1): readable, it returns -1 at once.
    int accept_authenticated(std::string_view token, std::chrono::steady_clock::time_point deadline,
                             std::optional<io::SealKeys>* keys = nullptr, int wake_fd = -1);
    [[nodiscard]] bool seals() const noexcept { return seal_; }
    /// Closes the socket and removes its file (a worker that will not accept again).
    void close() noexcept;

private:
    int fd_ = -1;
    std::string unix_path_;
    std::string port_text_;
    std::string allow_from_;
    bool seal_ = false;
};

}  // namespace sky::detail
