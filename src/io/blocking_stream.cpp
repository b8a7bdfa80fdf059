#include "io/blocking_stream.hpp"

#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <optional>
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

// Drops the first n bytes of list[first...], moving `first` past the buffers done.
void consume(std::vector<boost::asio::const_buffer>& list, std::size_t& first, std::size_t n) {
    while (n > 0) {
        auto& b = list[first];
        const std::size_t k = std::min(n, b.size());
        b += k;
        n -= k;
        if (b.size() == 0) ++first;
    }
}

}  // namespace

// Shared with the completion handlers, which may run after the BlockingStream is gone.
//
// Reading goes ahead of the caller: one read is always in flight into the slot after the last
// one filled (while that slot is free), and the next read starts from the completion itself, on
// the stream's strand. A caller that reads again right after a read so finds its bytes there or
// on the way, without handing a new operation to the strand each time; two full slots stop the
// reading (the stream's flow control takes over).
struct BlockingStream::State {
    static constexpr std::size_t kSlot = 256u << 10;
    struct Slot {
        std::vector<std::byte> data;
        std::size_t off = 0;
        std::size_t len = 0;
        bool full = false;
    };
    std::shared_ptr<Stream> stream;
    std::mutex m;
    std::condition_variable cv;
    Slot slots[2];         // under m
    int take = 0;          // under m: the slot the caller reads next
    int fill = 0;          // under m: the slot the next read fills
    bool reading = false;  // under m: a read is in flight
    bool ended = false;    // under m: the stream ended or failed, as read_error says
    boost::system::error_code read_error;
    bool writing = false;
    boost::system::error_code write_error;
    std::size_t write_bytes = 0;

    // Caller holds m: claims the next read if one may start; the slot it fills, or none.
    std::optional<int> claim_read() {
        if (reading || ended || slots[fill].full) return std::nullopt;
        reading = true;
        if (slots[fill].data.empty()) slots[fill].data.resize(kSlot);
        return fill;
    }

    // Starts a claimed read into `slot`: from the strand itself, or handed to it.
    static void start_read(const std::shared_ptr<State>& self, int slot, bool on_strand) {
        auto start = [self, slot, into = boost::asio::buffer(self->slots[slot].data)] {
            self->stream->async_read_some(
                into, [self, slot](boost::system::error_code ec, std::size_t n) {
                    std::optional<int> next;
                    {
                        std::lock_guard lk(self->m);
                        self->reading = false;
                        if (ec || n == 0) {
                            self->ended = true;
                            self->read_error = ec ? ec : boost::asio::error::eof;
                        } else {
                            auto& s = self->slots[slot];
                            s.off = 0;
                            s.len = n;
                            s.full = true;
                            self->fill = slot ^ 1;
                            next = self->claim_read();
                        }
                        self->cv.notify_all();
                    }
                    if (next) start_read(self, *next, true);
                });
        };
        if (on_strand) {
            start();
        } else {
            boost::asio::post(self->stream->get_executor(), std::move(start));
        }
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
    for (;;) {
        auto& slot = st.slots[st.take];
        if (slot.full) {
            const std::size_t n = std::min(buf.size(), slot.len - slot.off);
            std::memcpy(buf.data(), slot.data.data() + slot.off, n);
            slot.off += n;
            if (slot.off == slot.len) {
                slot.full = false;
                st.take ^= 1;
                if (auto slot = st.claim_read()) State::start_read(state_, *slot, false);
            }
            return n;
        }
        if (st.ended) break;
        if (auto slot = st.claim_read()) State::start_read(state_, *slot, false);
        st.cv.wait(lk, [&] { return st.slots[st.take].full || st.ended; });
    }
    const auto ec = st.read_error;
    lk.unlock();
    if (ec == boost::asio::error::eof || ec == boost::asio::error::operation_aborted) return 0;
    fail(ec, "read");
}

bool BlockingStream::wait_readable(std::chrono::milliseconds timeout) {
    forbid_blocking_on_io_thread("BlockingStream::wait_readable");
    State& st = *state_;
    std::unique_lock lk(st.m);
    if (auto slot = st.claim_read()) State::start_read(state_, *slot, false);
    return st.cv.wait_for(lk, timeout, [&] { return st.slots[st.take].full || st.ended; });
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
        // What the stream takes at once needs no wait (no asynchronous write is in flight here).
        if (std::size_t n = st.stream->try_write_some(rest); n > 0) {
            consume(list, first, n);
            continue;
        }
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
        consume(list, first, n);
    }
}

}  // namespace sky::detail::io
