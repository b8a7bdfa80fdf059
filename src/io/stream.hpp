#pragma once
// An asynchronous byte stream to a worker: a socket (Local, a Unix or TCP endpoint) or an SSH
// channel (direct-streamlocal / direct-tcpip). The pool's node connections read and write
// through it on the I/O core; nothing above it knows which it is.
#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/system/error_code.hpp>
#include <cstddef>
#include <span>
#include <string>

namespace sky::detail::io {

/// Completion of a read or write: the error (asio::error::eof at the end of the stream,
/// asio::error::operation_aborted after close()) and the bytes moved.
using IoHandler = boost::asio::any_completion_handler<void(boost::system::error_code, std::size_t)>;

class Stream {
public:
    using executor_type = boost::asio::any_io_executor;
    virtual ~Stream() = default;

    /// The strand every completion of this stream runs on. Operations are started from it
    /// (boost::asio::dispatch / post to it first); at most one read and one write at a time.
    virtual executor_type get_executor() = 0;

    /// Reads at least one byte into `buffer` (fewer than its size is fine).
    virtual void async_read_some(boost::asio::mutable_buffer buffer, IoHandler handler) = 0;

    /// Writes at least one byte of `buffers`, in order (a gathered write).
    virtual void async_write_some(std::span<const boost::asio::const_buffer> buffers,
                                  IoHandler handler) = 0;

    /// Writes what can be written now without blocking and returns the byte count (0: none).
    /// From any thread, but only while no async_write_some is in flight (the caller keeps
    /// that order): the low-latency path of a small call frame from the caller's thread. The
    /// default writes nothing, and the caller falls back to async_write_some.
    virtual std::size_t try_write_some(std::span<const boost::asio::const_buffer> buffers) {
        (void)buffers;
        return 0;
    }

    /// Ends the stream both ways; operations in flight complete (operation_aborted or eof).
    /// From any thread; idempotent; never throws.
    virtual void close() noexcept = 0;

    /// For messages: "unix socket to pid 1234", "ssh channel to 10.0.0.2:22".
    [[nodiscard]] virtual std::string describe() const = 0;

    /// Why the stream failed, in words, when an error_code says too little (an SSH session's
    /// own message); empty when it did not fail or the error_code says it all.
    [[nodiscard]] virtual std::string failure() const { return {}; }
};

}  // namespace sky::detail::io
