#pragma once
// One authenticated connection to the client: the worker's hello, the client's hello, the ready
// frame, and the loop that reads the client's frames and hands them on. The frames the worker
// sends while serving go through the session's Outbox, which outlives a connection.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>

#include "io/sealed.hpp"
#include "runtime/fd_transport.hpp"
#include "runtime/protocol.hpp"
#include "runtime/worker/core.hpp"
#include "runtime/worker/outbox.hpp"

namespace sky::detail {

/// What the serving loop hands the client's frames to.
class FrameHandler {
public:
    virtual ~FrameHandler() = default;
    virtual void on_call(Frame& f) = 0;
    virtual void on_cancel(std::uint64_t call_id) = 0;
    virtual void on_confirm(std::uint64_t call_id) = 0;
    virtual void on_ack(std::span<const std::uint64_t> call_ids) = 0;
    virtual void on_layout(std::span<const std::byte> payload) = 0;
    /// The pool's preemption notice (a PreemptMsg; empty: none stands any more).
    virtual void on_preempt(std::span<const std::byte> payload) = 0;
    /// Every frame read so far was handed on; the reader waits for more next (calls queued
    /// one by one start now, with one wake-up for all of them).
    virtual void on_frames_taken() {}
};

class Connection {
public:
    /// How serving ended.
    enum class End { shutdown, closed, broken };

    /// Takes the authenticated descriptor `fd`; with `keys`, its stream is sealed from here on
    /// (io/sealed.hpp).
    Connection(int fd, WorkerCore& core, const std::optional<io::SealKeys>& keys = std::nullopt);
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;

    [[nodiscard]] Transport& transport() noexcept { return *t_; }

    /// Sends the worker's hello (what it is and what it can run); false when it cannot.
    bool send_hello();
    /// Waits for the client's hello (up to `within`) and checks it; false, with a message, when
    /// there is none or it is unreadable or of another protocol.
    bool read_hello(ClientHello& ch, std::chrono::milliseconds within = std::chrono::seconds(60));
    /// Sends the ready frame; from then on frames up to `max_frame` are read.
    bool send_ready(const WorkerReady& ready, std::uint64_t max_frame);
    /// Reads and dispatches the client's frames until the client says shutdown, goes away
    /// (closed) or breaks the protocol or the connection (broken). Answers heartbeats through
    /// `out`, and flushes it before each wait. `heard` runs for every read (the frames it
    /// brought arrived together).
    End serve(FrameHandler& h, Outbox& out, const std::function<void()>& heard);
    /// Ends the connection both ways. Never throws.
    void close() noexcept { t_->shutdown(); }

private:
    /// Writes one frame straight to the connection (the handshake's frames).
    bool send(MsgType type, const Buffer& payload, const char* what);

    WorkerCore& core_;
    std::unique_ptr<Transport> t_;  // the socket, sealed or not
    std::unique_ptr<FrameReader> reader_;
};

}  // namespace sky::detail
