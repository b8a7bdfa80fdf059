#include "io/blocking_stream.hpp"

#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "io/io_core.hpp"
#include "sky/errors.hpp"

namespace sky::detail::io {

void forbid_blocking_on_io_thread(std::string_view what) {
    if (!on_io_thread()) return;
    throw std::logic_error(std::string(what) +
                           ": a blocking call on a thread of sky's I/O core would wait for work "
                           "that only those threads can do; use the asynchronous form there");
}

namespace {
// What wait_readable reads ahead into (a later read_some hands it out).
constexpr std::size_t kAhead = 64u << 10;
}  // namespace

// Shared with the completion handlers, which may run after the BlockingStream is gone.
struct BlockingStream::State {
    std::shared_ptr<Stream> stream;
    std::mutex m;
    std::condition_variable cv;
    // One read at a time: into the caller's buffer, or into `ahead` for wait_readable.
    bool reading = false;
    boost::system::error_code read_error;
    std::size_t read_bytes = 0;
    std::vector<std::byte> ahead;
    std::size_t ahead_off = 0;
    std::size_t ahead_len = 0;
    bool ahead_failed = false;  // the read-ahead ended with read_error, not yet reported
    bool writing = false;
    boost::system::error_code write_error;
    std::size_t write_bytes = 0;

    // Caller holds m.
    static void start_read(const std::shared_ptr<State>& self, boost::asio::mutable_buffer into,
                           bool is_ahead) {
        self->reading = true;
        boost::asio::post(self->stream->get_executor(), [self, into, is_ahead] {
            self->stream->async_read_some(
                into, [self, is_ahead](boost::system::error_code ec, std::size_t n) {
                    std::lock_guard lk(self->m);
                    self->reading = false;
                    self->read_error = ec;
                    self->read_bytes = n;
                    if (is_ahead) {
                        self->ahead_off = 0;
                        self->ahead_len = n;
                        self->ahead_failed = static_cast<bool>(ec);
                    }
                    self->cv.notify_all();
                });
        });
    }
};

BlockingStream::BlockingStream(std::unique_ptr<Stream> stream, Raise raise)
    : state_(std::make_shared<State>()), raise_(std::move(raise)) {
    describe_ = stream->describe();
    state_->stream = std::move(stream);
}

BlockingStream::~BlockingStream() { state_->stream->close(); }

std::string BlockingStream::describe() const { return describe_; }

void BlockingStream::shutdown() noexcept { state_->stream->close(); }

void BlockingStream::fail(const boost::system::error_code& error, const char* doing) const {
    const std::string failure = state_->stream->failure();
    if (raise_) raise_(error, failure, describe_);
    throw sky::Error(describe_ + ": " + doing +
                     " failed: " + (failure.empty() ? error.message() : failure));
}

std::size_t BlockingStream::read_some(std::span<std::byte> buf) {
    forbid_blocking_on_io_thread("BlockingStream::read_some");
    if (buf.empty()) return 0;
    State& st = *state_;
    std::unique_lock lk(st.m);
    // A read-ahead of wait_readable in flight: its bytes come first.
    st.cv.wait(lk, [&] { return !st.reading; });
    boost::system::error_code ec;
    if (st.ahead_len > st.ahead_off) {
        const std::size_t n = std::min(buf.size(), st.ahead_len - st.ahead_off);
        std::memcpy(buf.data(), st.ahead.data() + st.ahead_off, n);
        st.ahead_off += n;
        return n;
    }
    if (st.ahead_failed) {
        st.ahead_failed = false;
        ec = st.read_error;
    } else {
        State::start_read(state_, boost::asio::buffer(buf.data(), buf.size()), false);
        st.cv.wait(lk, [&] { return !st.reading; });
        if (!st.read_error) return st.read_bytes;
        ec = st.read_error;
    }
    if (ec == boost::asio::error::eof || ec == boost::asio::error::operation_aborted) return 0;
    lk.unlock();
    fail(ec, "read");
}

bool BlockingStream::wait_readable(std::chrono::milliseconds timeout) {
    forbid_blocking_on_io_thread("BlockingStream::wait_readable");
    State& st = *state_;
    std::unique_lock lk(st.m);
    if (st.ahead_len > st.ahead_off || st.ahead_failed) return true;
    if (!st.reading) {
        st.ahead.resize(kAhead);
        State::start_read(state_, boost::asio::buffer(st.ahead), true);
    }
    return st.cv.wait_for(lk, timeout, [&] { return !st.reading; });
}

void BlockingStream::write_all(std::span<const std::span<const std::byte>> bufs) {
    forbid_blocking_on_io_thread("BlockingStream::write_all");
    std::vector<boost::asio::const_buffer> list;
    for (auto b : bufs)
        if (!b.empty()) list.emplace_back(b.data(), b.size());
    State& st = *state_;
    std::size_t first = 0;
    while (first < list.size()) {
        std::span<const boost::asio::const_buffer> rest(list.data() + first, list.size() - first);
        std::unique_lock lk(st.m);
        st.writing = true;
        auto self = state_;
        boost::asio::post(st.stream->get_executor(), [self, rest] {
            self->stream->async_write_some(rest,
                                           [self](boost::system::error_code ec, std::size_t n) {
                                               std::lock_guard lk(self->m);
                                               self->writing = false;
                                               self->write_error = ec;
                                               self->write_bytes = n;
                                               self->cv.notify_all();
                                           });
        });
        st.cv.wait(lk, [&] { return !st.writing; });
        const auto ec = st.write_error;
        std::size_t n = st.write_bytes;
        lk.unlock();
        if (ec) fail(ec, "write");
        // A stream that takes nothing without an error would loop here forever.
        if (n == 0) fail(boost::asio::error::broken_pipe, "write");
        while (n > 0) {
            auto& b = list[first];
            const std::size_t k = std::min(n, b.size());
            b += k;
            n -= k;
            if (b.size() == 0) ++first;
        }
    }
}

}  // namespace sky::detail::io
