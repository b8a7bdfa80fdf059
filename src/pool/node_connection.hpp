#pragma once
// One connection of the pool to a node's worker, on the I/O core: the handshake (the rules of
// runtime/client_channel.hpp, waited for with timers instead of a blocked thread), then frames
// read and decoded on the stream's strand and handed to the pool in batches, and a write queue
// that any thread may add to (a small call frame goes out straight from the caller's thread
// when nothing is queued). It knows nothing of scheduling: what a frame means is the pool's.
//
// "The connection ended" is all it reports when the stream ends; whether the pool reconnects
// (a resumed session) or loses the node is the pool's decision.
#include <atomic>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "io/sealed.hpp"
#include "io/stream.hpp"
#include "runtime/client_channel.hpp"

namespace sky::detail {

class NodeConnection : public std::enable_shared_from_this<NodeConnection> {
public:
    using Clock = std::chrono::steady_clock;
    /// Frames decoded from one read (results, errors, call output, metrics), in order.
    using OnFrames = std::function<void(std::vector<Incoming>& frames)>;
    /// The stream ended (once, after a successful handshake): why, and whether the worker
    /// broke the protocol.
    using OnEnded = std::function<void(const std::string& why, bool protocol_error)>;
    /// The handshake's outcome: the worker's ready frame, or the error.
    using OnReady = std::function<void(std::exception_ptr error, WorkerReady ready)>;

    /// `name` prefixes errors ("node 1 (i-0abc)").
    NodeConnection(std::unique_ptr<io::Stream> stream, std::string name);
    ~NodeConnection();
    NodeConnection(const NodeConnection&) = delete;
    NodeConnection& operator=(const NodeConnection&) = delete;

    /// Runs the handshake within its bounds; once the worker is ready, reads its frames. Each
    /// callback runs on the stream's strand (one of sky's I/O threads: it must not block).
    void start(ClientChannel::Handshake h, OnReady ready, OnFrames frames, OnEnded ended);

    /// Queues bytes for the worker (from any thread); written in order.
    void write(Outgoing&& out);
    /// Queues a frame without a payload (cancel, shutdown).
    void write_control(MsgType type, std::uint64_t call_id);
    /// Queues a frame whose payload is shared (the layout goes to every node from one buffer).
    void write_frame(MsgType type, const std::shared_ptr<const Buffer>& payload);
    /// The pool received these calls' answers (result and error frames): the worker may forget
    /// them. Acks wait to travel in one frame with the next calls (take_acks) or flush_acks(),
    /// and go at once when many wait: a resumable worker keeps each answer until then.
    void ack(std::span<const std::uint64_t> call_ids);
    /// Appends the waiting acks as one ack frame to `out` (nothing when none wait).
    void take_acks(Buffer& out);
    /// Writes the waiting acks now.
    void flush_acks();
    /// Queues a heartbeat. The worker answers every one: unanswered() measures from the moment
    /// it was written until anything arrives from the worker.
    void heartbeat();
    /// How long the oldest written heartbeat has waited for a byte from the worker (zero when
    /// none waits). A frozen worker or a half-open connection is silent; a worker busy sending a
    /// large result is not.
    [[nodiscard]] Clock::duration unanswered(Clock::time_point now) const noexcept;

    /// Ends the stream (from any thread, idempotent). The reader then sees the end: after a
    /// successful handshake the ended callback may still run once, on an I/O thread, as for a
    /// stream the worker closed (the pool drops it by generation, or has said why already), so
    /// whatever the callbacks refer to must outlive every handler that holds this connection.
    void close() noexcept;
    [[nodiscard]] const std::string& name() const noexcept { return name_; }

private:
    /// Bytes on their way: `out`, of which the first `skip` bytes are written.
    struct Pending {
        Outgoing out;
        std::size_t skip = 0;
        bool heartbeat = false;
    };
    void queue(Pending&& p);
    /// The write loop, on the strand: takes what is queued and writes it.
    void write_next();
    void on_written(boost::system::error_code ec, std::size_t n);
    void read_next();
    void on_read(boost::system::error_code ec, std::size_t n);
    /// Takes every whole frame out of the read buffer (false: the connection ended).
    bool take_frames();
    void handle(Frame& f);
    /// Waits for the handshake's next step until its deadline.
    void arm_timer();
    enum class End { closed, failed, protocol };
    /// The stream ended: the handshake fails, or the pool hears of it (once).
    void end(End kind, const std::string& why);
    void handshake_failed(std::exception_ptr e);

    std::unique_ptr<io::Stream> stream_;  ///< an io::SealedStream over the backend's stream
    io::SealedStream* sealed_ = nullptr;  ///< the same, sealed once the handshake says so
    std::string name_;
    boost::asio::steady_timer timer_;  ///< the handshake's bounds; on the strand

    // Reading: on the strand only.
    std::optional<ClientHandshake> handshake_;
    std::uint64_t max_frame_ = default_max_frame;        ///< the limit of the next frame
    std::uint64_t serve_max_frame_ = default_max_frame;  ///< once the worker is ready
    Buffer in_;                                          ///< the read buffer (its size is its room)
    std::size_t in_pos_ = 0;                             ///< the next frame starts here
    std::size_t in_end_ = 0;                             ///< bytes read end here
    Frame big_;  ///< a large frame being read straight into its own buffer
    std::size_t big_have_ = 0;
    bool reading_big_ = false;
    std::vector<Incoming> batch_;
    OnReady on_ready_;
    OnFrames on_frames_;
    OnEnded on_ended_;
    bool ended_ = false;

    // Writing: the queue under wm_; what is being written belongs to the strand.
    std::mutex wm_;
    std::deque<Pending> queued_;
    bool writing_ = false;  ///< a write loop runs (or is posted): writes go to the queue
    std::deque<Pending> inflight_;
    std::vector<boost::asio::const_buffer> buffers_;

    std::mutex am_;
    std::vector<std::uint64_t> acks_;  ///< under am_

    std::atomic<bool> closed_{false};
    std::atomic<std::int64_t> heartbeat_written_{0};  ///< steady ns; 0: none waits
};

}  // namespace sky::detail
