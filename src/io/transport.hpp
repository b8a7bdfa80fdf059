#pragma once
// A blocking byte stream that carries the wire protocol: a socket to a Local worker, an SSH
// direct-tcpip channel to a remote one, a worker's own socket. It is the I/O core's, beside its
// asynchronous io::Stream (io/stream.hpp; io::BlockingStream is a Transport over one), below the
// runtime: the worker side and the client side read and write the same stream types. The runtime
// knows nothing else about it.
#include <chrono>
#include <cstddef>
#include <memory>
#include <span>
#include <string>

namespace sky::detail {

class Transport {
public:
    virtual ~Transport() = default;
    /// Reads at least one byte and at most buf.size(); returns 0 on orderly end of stream.
    /// Throws sky::Error on failure. Called from one reader thread at a time.
    virtual std::size_t read_some(std::span<std::byte> buf) = 0;
    /// Writes every byte of every buffer, in order. Throws sky::Error on failure.
    /// Callers serialize writers among themselves, but a write runs concurrently with read_some.
    virtual void write_all(std::span<const std::span<const std::byte>> bufs) = 0;
    /// Ends the stream both ways; a blocked read_some returns 0 or throws. Never throws.
    virtual void shutdown() noexcept = 0;
    /// Waits until read_some would not block; false when `timeout` passed first. The default
    /// cannot tell and says yes.
    virtual bool wait_readable(std::chrono::milliseconds timeout) {
        (void)timeout;
        return true;
    }
    /// For messages: "unix socket to pid 1234", "ssh channel to 10.0.0.2:22".
    [[nodiscard]] virtual std::string describe() const = 0;
};

}  // namespace sky::detail
