#pragma once
// A Transport over a connected socket (Unix-domain socketpair or TCP).
#include <atomic>
#include <chrono>
#include <string>

#include "io/transport.hpp"

namespace sky::detail {

class FdTransport final : public Transport {
public:
    /// Takes ownership of `fd`.
    FdTransport(int fd, std::string description);
    ~FdTransport() override;
    std::size_t read_some(std::span<std::byte> buf) override;
    void write_all(std::span<const std::span<const std::byte>> bufs) override;
    void shutdown() noexcept override;
    [[nodiscard]] std::string describe() const override { return description_; }
    /// Waits until a read would not block; false on timeout.
    bool wait_readable(std::chrono::milliseconds timeout) override;

private:
    int fd_;
    std::string description_;
    std::atomic<bool> shut_{false};
};

/// Connects to 127.0.0.1:port (TCP, no delay); throws sky::Error.
int connect_tcp(const std::string& host, int port, std::chrono::milliseconds timeout);

/// Connects to the Unix socket at `path` (a worker listening on unix:PATH); throws
/// sky::Error.
int connect_unix(const std::string& path);

}  // namespace sky::detail
