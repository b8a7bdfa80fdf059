#pragma once
// An io::Stream over a connected socket: a Local worker's socket pair, a Unix-socket or TCP
// connection to a worker. An Asio socket on the I/O core (not a plain descriptor: a socket's
// writes pass MSG_NOSIGNAL, so a worker that died under a write is an error, never a SIGPIPE
// that kills the user's program), its completions on a strand of its own.
#include <atomic>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/strand.hpp>
#include <string>

#include "io/io_core.hpp"
#include "io/stream.hpp"

namespace sky::detail::io {

class FdStream final : public Stream {
public:
    /// Takes ownership of the connected socket `fd`; `description` names it in messages
    /// ("worker pid 1234").
    FdStream(int fd, std::string description);
    /// Closes the socket. The owner keeps the stream alive until its operations completed.
    ~FdStream() override;
    FdStream(const FdStream&) = delete;
    FdStream& operator=(const FdStream&) = delete;

    executor_type get_executor() override { return strand_; }
    void async_read_some(boost::asio::mutable_buffer buffer, IoHandler handler) override;
    /// `buffers` (the array) must stay valid until the handler runs.
    void async_write_some(std::span<const boost::asio::const_buffer> buffers,
                          IoHandler handler) override;
    /// One non-blocking sendmsg from the calling thread.
    std::size_t try_write_some(std::span<const boost::asio::const_buffer> buffers) override;
    /// Shuts the socket down both ways (thread-safe): a read in flight completes with eof, a
    /// write with an error; later operations complete with operation_aborted.
    void close() noexcept override;
    [[nodiscard]] std::string describe() const override { return description_; }

private:
    boost::asio::strand<boost::asio::io_context::executor_type> strand_;
    boost::asio::generic::stream_protocol::socket socket_;
    const int fd_;
    std::atomic<bool> closed_{false};
    std::string description_;
};

}  // namespace sky::detail::io
