#include "io/transport_stream.hpp"

#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>
#include <exception>

namespace sky::detail::io {

TransportStream::TransportStream(std::unique_ptr<Transport> transport)
    : transport_(std::move(transport)), strand_(boost::asio::make_strand(executor())) {
    reader_ = std::thread([this] { run(true); });
    writer_ = std::thread([this] { run(false); });
}

TransportStream::~TransportStream() {
    close();
    for (std::thread* t : {&reader_, &writer_}) {
        if (!t->joinable()) continue;
        if (t->get_id() == std::this_thread::get_id())
            t->detach();  // never: handlers run on the strand, not here
        else
            t->join();
    }
}

void TransportStream::async_read_some(boost::asio::mutable_buffer buffer, IoHandler handler) {
    std::unique_lock lk(m_);
    if (closed_) {
        lk.unlock();
        return boost::asio::post(strand_, [h = std::move(handler)]() mutable {
            std::move(h)(boost::asio::error::operation_aborted, std::size_t{0});
        });
    }
    read_.buffers.assign(1, buffer);
    // Never `=`: Boost 1.81's any_completion_handler move assignment copies its argument as an
    // lvalue into a new wrapper of itself, recursing until the stack ends. swap() moves.
    read_.handler.swap(handler);
    read_.pending = true;
    cv_.notify_all();
}

void TransportStream::async_write_some(std::span<const boost::asio::const_buffer> buffers,
                                       IoHandler handler) {
    std::unique_lock lk(m_);
    if (closed_) {
        lk.unlock();
        return boost::asio::post(strand_, [h = std::move(handler)]() mutable {
            std::move(h)(boost::asio::error::operation_aborted, std::size_t{0});
        });
    }
    write_.buffers.clear();
    for (const auto& b : buffers)
        write_.buffers.emplace_back(const_cast<void*>(b.data()), b.size());
    write_.handler.swap(handler);  // not `=` (see async_read_some)
    write_.pending = true;
    cv_.notify_all();
}

void TransportStream::run(bool reads) {
    Request& r = reads ? read_ : write_;
    for (;;) {
        std::vector<boost::asio::mutable_buffer> buffers;
        {
            std::unique_lock lk(m_);
            cv_.wait(lk, [&] { return r.pending || closed_; });
            if (!r.pending) return;  // closed with nothing to do
            buffers = r.buffers;
        }
        boost::system::error_code ec;
        std::size_t n = 0;
        try {
            if (reads) {
                const auto& b = buffers.front();
                n = transport_->read_some({static_cast<std::byte*>(b.data()), b.size()});
                if (n == 0) ec = boost::asio::error::eof;
            } else {
                std::vector<std::span<const std::byte>> spans;
                for (const auto& b : buffers) {
                    spans.emplace_back(static_cast<const std::byte*>(b.data()), b.size());
                    n += b.size();
                }
                transport_->write_all(spans);
            }
        } catch (const std::exception& e) {
            fail(e.what());
            ec = boost::asio::error::connection_reset;
            n = 0;
        }
        IoHandler h;
        {
            std::lock_guard lk(m_);
            h.swap(r.handler);
            r.pending = false;
        }
        boost::asio::post(strand_, [h = std::move(h), ec, n]() mutable { std::move(h)(ec, n); });
    }
}

void TransportStream::fail(const std::string& why) {
    std::lock_guard lk(m_);
    if (failure_.empty()) failure_ = why;
}

void TransportStream::close() noexcept {
    {
        std::lock_guard lk(m_);
        if (closed_) return;
        closed_ = true;
    }
    cv_.notify_all();
    transport_->shutdown();  // a blocked read_some or write_all returns
}

std::string TransportStream::describe() const { return transport_->describe(); }

std::string TransportStream::failure() const {
    std::lock_guard lk(m_);
    return failure_;
}

}  // namespace sky::detail::io
