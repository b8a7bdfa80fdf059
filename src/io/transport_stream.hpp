#pragma once
// Transitional: an io::Stream over a blocking runtime::Transport (today's SSH tunnels), driven
// by two threads of its own (one blocks in read_some, one in write_all). It lets the pool consume
// io::Streams everywhere while the SSH layer still returns Transports; it goes once SSH channels
// are native io::Streams (issue 22).
#include <boost/asio/strand.hpp>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "io/io_core.hpp"
#include "io/stream.hpp"
#include "runtime/transport.hpp"

namespace sky::detail::io {

class TransportStream final : public Stream {
public:
    explicit TransportStream(std::unique_ptr<Transport> transport);
    /// Shuts the transport down and joins its threads.
    ~TransportStream() override;
    TransportStream(const TransportStream&) = delete;
    TransportStream& operator=(const TransportStream&) = delete;

    executor_type get_executor() override { return strand_; }
    void async_read_some(boost::asio::mutable_buffer buffer, IoHandler handler) override;
    void async_write_some(std::span<const boost::asio::const_buffer> buffers,
                          IoHandler handler) override;
    void close() noexcept override;
    [[nodiscard]] std::string describe() const override;
    [[nodiscard]] std::string failure() const override;

private:
    /// One blocking operation at a time, handed to its thread.
    struct Request {
        bool pending = false;
        std::vector<boost::asio::mutable_buffer> buffers;
        IoHandler handler;
    };
    void run(bool reads);
    void fail(const std::string& why);

    std::unique_ptr<Transport> transport_;
    boost::asio::strand<boost::asio::io_context::executor_type> strand_;
    mutable std::mutex m_;
    std::condition_variable cv_;
    Request read_, write_;
    bool closed_ = false;
    std::string failure_;
    std::thread reader_, writer_;
};

}  // namespace sky::detail::io
