#include "pool/node_connection.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>
#include <boost/system/errc.hpp>
#include <cstring>

namespace sky::detail {

namespace {

// Reads ask for at least this much room; a frame up to large_frame is assembled in the read
// buffer, a larger one is read straight into a buffer of its own (no second copy).
constexpr std::size_t read_room = 256u << 10;
constexpr std::uint64_t large_frame = 4u << 20;
// Acks wait for the next calls or the supervisor's next round (a second at most) unless this
// many do: an ack frame of 8 bytes per answer then goes out at once.
constexpr std::size_t max_waiting_acks = 512;
// One gathered write takes at most this many pieces (the kernel's limit is IOV_MAX).
constexpr std::size_t max_pieces = 64;

std::size_t total_size(const Outgoing& o) {
    std::size_t n = o.small.size();
    for (const auto& b : o.big) n += b.second->size();
    return n;
}

// The bytes of `o` after its first `skip`, as buffers in order (Outgoing keeps large argument
// buffers by reference, at offsets into its small part).
void append_pieces(const Outgoing& o, std::size_t skip,
                   std::vector<boost::asio::const_buffer>& out) {
    auto piece = [&](const std::byte* p, std::size_t n) {
        if (skip >= n) {
            skip -= n;
            return;
        }
        out.emplace_back(p + skip, n - skip);
        skip = 0;
    };
    std::size_t from = 0;
    for (const auto& [at, buf] : o.big) {
        piece(o.small.data() + from, at - from);
        piece(buf->data(), buf->size());
        from = at;
    }
    piece(o.small.data() + from, o.small.size() - from);
}

std::int64_t now_ns() { return NodeConnection::Clock::now().time_since_epoch().count(); }

}  // namespace

NodeConnection::NodeConnection(std::unique_ptr<io::Stream> stream, std::string name)
    : stream_(std::make_unique<io::SealedStream>(std::move(stream))),
      name_(std::move(name)),
      timer_(stream_->get_executor()) {
    sealed_ = static_cast<io::SealedStream*>(stream_.get());
}

NodeConnection::~NodeConnection() { stream_->close(); }

void NodeConnection::start(ClientChannel::Handshake h, OnReady ready, OnFrames frames,
                           OnEnded ended) {
    boost::asio::post(stream_->get_executor(),
                      [self = shared_from_this(), h = std::move(h), ready = std::move(ready),
                       frames = std::move(frames), ended = std::move(ended)]() mutable {
                          self->on_ready_ = std::move(ready);
                          self->on_frames_ = std::move(frames);
                          self->on_ended_ = std::move(ended);
                          self->serve_max_frame_ = h.max_frame;
                          self->handshake_.emplace(std::move(h), self->name_, Clock::now());
                          self->max_frame_ = self->handshake_->frame_limit();
                          self->arm_timer();
                          self->read_next();
                      });
}

void NodeConnection::arm_timer() {
    timer_.expires_at(handshake_->deadline());  // a wait in progress ends (operation_aborted)
    timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
        if (ec || !self->handshake_) return;
        try {
            self->handshake_->timed_out();
        } catch (...) {
            self->handshake_failed(std::current_exception());
        }
    });
}

// ---- reading ----------------------------------------------------------------------------------

void NodeConnection::read_next() {
    if (ended_) return;
    boost::asio::mutable_buffer into;
    if (reading_big_) {
        // Grows as the bytes arrive (doubling; realloc remaps large blocks), so a header alone
        // never costs what its length field claims.
        const std::uint64_t len = big_.header.length;
        if (big_have_ == big_.owned.size())
            big_.owned.resize(static_cast<std::size_t>(
                std::min<std::uint64_t>(len, 2 * big_have_ + large_frame)));
        into = {big_.owned.data() + big_have_, big_.owned.size() - big_have_};
    } else {
        // Room for read_room more bytes, or for the whole frame that has begun if it is larger.
        std::size_t need = read_room;
        const std::size_t have = in_end_ - in_pos_;
        if (have >= frame_header_size) {
            std::uint64_t len = 0;
            std::memcpy(&len, in_.data() + in_pos_ + 16, 8);
            need = std::max<std::size_t>(need, frame_header_size + len - have);
        }
        if (in_pos_ > 0 && (have == 0 || in_.size() - in_end_ < need)) {
            if (have) std::memmove(in_.data(), in_.data() + in_pos_, have);
            in_pos_ = 0;
            in_end_ = have;
        }
        if (in_.size() - in_end_ < need) in_.resize(in_end_ + need);
        into = {in_.data() + in_end_, in_.size() - in_end_};
    }
    stream_->async_read_some(
        into, [self = shared_from_this()](boost::system::error_code ec, std::size_t n) {
            self->on_read(ec, n);
        });
}

void NodeConnection::on_read(boost::system::error_code ec, std::size_t n) {
    if (ended_) return;
    if (n > 0) {
        heartbeat_written_.store(0, std::memory_order_relaxed);  // the worker is there
        if (reading_big_)
            big_have_ += n;
        else
            in_end_ += n;
    }
    if (!take_frames()) return;
    if (!batch_.empty() && on_frames_) on_frames_(batch_);
    batch_.clear();
    if (!ec) return read_next();
    // A frame cut off by the end of the stream is a worker that died mid-write, not one that
    // broke the protocol: the backend tells why it ended.
    const std::string failure = stream_->failure();
    // A sealed record that failed authentication: the bytes are not the worker's.
    if (ec == boost::system::errc::bad_message)
        return end(End::protocol, fmt::format("{}: {}", stream_->describe(), failure));
    if (ec == boost::asio::error::eof || ec == boost::asio::error::operation_aborted)
        return end(End::closed, failure.empty() ? "the worker closed the connection" : failure);
    end(End::failed, failure.empty()
                         ? fmt::format("read from {} failed: {}", stream_->describe(), ec.message())
                         : failure);
}

bool NodeConnection::take_frames() {
    try {
        if (reading_big_) {
            if (big_have_ < big_.header.length) return true;
            big_.owned.resize(big_have_);
            big_.payload = big_.owned.span();
            reading_big_ = false;
            handle(big_);
            big_ = Frame();
        }
        while (!ended_ && in_end_ - in_pos_ >= frame_header_size) {
            Frame f;
            f.header = decode_header(in_.data() + in_pos_, max_frame_);
            const std::uint64_t len = f.header.length;
            const std::size_t avail = in_end_ - in_pos_ - frame_header_size;
            if (avail < len) {
                if (len <= large_frame) break;  // read_next() makes room for all of it
                big_ = Frame();
                big_.header = f.header;
                big_.owned.resize(static_cast<std::size_t>(
                    std::min<std::uint64_t>(len, 2 * avail + large_frame)));
                std::memcpy(big_.owned.data(), in_.data() + in_pos_ + frame_header_size, avail);
                big_have_ = avail;
                reading_big_ = true;
                in_pos_ = in_end_ = 0;
                break;
            }
            f.payload = {in_.data() + in_pos_ + frame_header_size, static_cast<std::size_t>(len)};
            in_pos_ += frame_header_size + static_cast<std::size_t>(len);
            handle(f);
        }
        if (in_pos_ == in_end_) in_pos_ = in_end_ = 0;
    } catch (const ProtocolError& e) {
        end(End::protocol, e.what());
        return false;
    }
    return !ended_;
}

void NodeConnection::handle(Frame& f) {
    if (!handshake_) {
        // Decoded in place: an Incoming is large (error, log and metrics fields), and a read of
        // small results holds many.
        Incoming& in = batch_.emplace_back();
        try {
            decode_incoming(f, in);  // a ProtocolError ends the connection (take_frames)
        } catch (...) {
            batch_.pop_back();
            throw;
        }
        return;
    }
    try {
        Buffer answer = handshake_->on_frame(f, Clock::now());
        if (auto keys = handshake_->take_keys()) {
            // Every byte after the worker's proof is sealed, those read with it too.
            sealed_->seal(*keys, {in_.data() + in_pos_, in_end_ - in_pos_});
            in_pos_ = in_end_ = 0;
        }
        if (!answer.empty()) {
            Outgoing o;
            o.small = std::move(answer);
            queue({std::move(o)});
        }
        if (!handshake_->done()) {
            max_frame_ = handshake_->frame_limit();
            arm_timer();
            return;
        }
    } catch (...) {
        handshake_failed(std::current_exception());
        return;
    }
    timer_.cancel();
    WorkerReady ready = handshake_->ready();
    handshake_.reset();
    max_frame_ = serve_max_frame_;
    // Called once, then dropped: what it holds (the pool, during its start) is let go.
    auto on_ready = std::move(on_ready_);
    on_ready_ = nullptr;
    on_ready(nullptr, std::move(ready));
}

void NodeConnection::handshake_failed(std::exception_ptr e) {
    if (ended_) return;
    ended_ = true;
    handshake_.reset();
    timer_.cancel();
    close();
    auto on_ready = std::move(on_ready_);
    on_ready_ = nullptr;
    on_frames_ = nullptr;
    on_ended_ = nullptr;
    if (on_ready) on_ready(std::move(e), {});
}

void NodeConnection::end(End kind, const std::string& why) {
    if (ended_) return;
    if (handshake_) {
        try {
            if (kind == End::protocol) handshake_->bad_frame(ProtocolError(why));
            if (kind == End::closed) handshake_->ended();
            handshake_->failed(why);
        } catch (...) {
            handshake_failed(std::current_exception());
        }
        return;
    }
    ended_ = true;
    close();
    auto on_ended = std::move(on_ended_);
    on_ended_ = nullptr;
    on_frames_ = nullptr;
    if (on_ended) on_ended(why, kind == End::protocol);
}

// ---- writing ----------------------------------------------------------------------------------

void NodeConnection::write(Outgoing&& out) {
    if (!out.empty()) queue({std::move(out)});
}

void NodeConnection::write_control(MsgType type, std::uint64_t call_id) {
    Outgoing o;
    o.small.resize(frame_header_size);
    encode_header(o.small.data(), type, call_id, 0);
    queue({std::move(o)});
}

void NodeConnection::write_frame(MsgType type, const std::shared_ptr<const Buffer>& payload) {
    Outgoing o;
    o.small.resize(frame_header_size);
    encode_header(o.small.data(), type, 0, payload->size());
    o.big.emplace_back(frame_header_size, payload);
    queue({std::move(o)});
}

void NodeConnection::ack(std::span<const std::uint64_t> call_ids) {
    bool flush = false;
    {
        std::lock_guard lk(am_);
        acks_.insert(acks_.end(), call_ids.begin(), call_ids.end());
        flush = acks_.size() >= max_waiting_acks;
    }
    if (flush) flush_acks();
}

void NodeConnection::take_acks(Buffer& out) {
    std::lock_guard lk(am_);
    if (acks_.empty()) return;
    append_ack_frame(out, acks_);
    acks_.clear();
}

void NodeConnection::flush_acks() {
    Outgoing o;
    take_acks(o.small);
    if (!o.empty()) queue({std::move(o)});
}

void NodeConnection::heartbeat() {
    Outgoing o;
    o.small.resize(frame_header_size);
    encode_header(o.small.data(), MsgType::heartbeat, 0, 0);
    Pending p{std::move(o)};
    p.heartbeat = true;
    queue(std::move(p));
}

NodeConnection::Clock::duration NodeConnection::unanswered(Clock::time_point now) const noexcept {
    const std::int64_t at = heartbeat_written_.load(std::memory_order_relaxed);
    if (at == 0) return {};
    return now - Clock::time_point(Clock::duration(at));
}

void NodeConnection::queue(Pending&& p) {
    std::unique_lock lk(wm_);
    if (closed_.load(std::memory_order_acquire)) return;
    if (!writing_) {
        // Nothing queued or being written: write from this thread what the socket takes now
        // (a call frame usually goes out whole, without a thread hand-off).
        std::vector<boost::asio::const_buffer> bufs;
        append_pieces(p.out, p.skip, bufs);
        p.skip += stream_->try_write_some(bufs);
        if (p.skip == total_size(p.out)) {
            if (p.heartbeat) {
                std::int64_t none = 0;
                heartbeat_written_.compare_exchange_strong(none, now_ns());
            }
            return;
        }
        writing_ = true;
        queued_.push_back(std::move(p));
        lk.unlock();
        boost::asio::post(stream_->get_executor(),
                          [self = shared_from_this()] { self->write_next(); });
        return;
    }
    queued_.push_back(std::move(p));
}

void NodeConnection::write_next() {
    if (inflight_.empty()) {
        std::lock_guard lk(wm_);
        if (queued_.empty() || closed_.load(std::memory_order_acquire)) {
            queued_.clear();
            writing_ = false;
            return;
        }
        inflight_.swap(queued_);
    }
    buffers_.clear();
    for (const auto& p : inflight_) {
        append_pieces(p.out, p.skip, buffers_);
        if (buffers_.size() >= max_pieces) break;
    }
    if (buffers_.size() > max_pieces) buffers_.resize(max_pieces);
    stream_->async_write_some(
        buffers_, [self = shared_from_this()](boost::system::error_code ec, std::size_t n) {
            self->on_written(ec, n);
        });
}

void NodeConnection::on_written(boost::system::error_code ec, std::size_t n) {
    if (ec) {
        // The stream is broken: nothing more goes out, and the reader sees the end.
        inflight_.clear();
        {
            std::lock_guard lk(wm_);
            queued_.clear();
        }
        close();
        return;
    }
    while (n > 0 && !inflight_.empty()) {
        Pending& p = inflight_.front();
        const std::size_t left = total_size(p.out) - p.skip;
        if (n < left) {
            p.skip += n;
            break;
        }
        n -= left;
        if (p.heartbeat) {
            std::int64_t none = 0;
            heartbeat_written_.compare_exchange_strong(none, now_ns());
        }
        inflight_.pop_front();
    }
    write_next();
}

void NodeConnection::close() noexcept {
    closed_.store(true, std::memory_order_release);
    stream_->close();
}

}  // namespace sky::detail
