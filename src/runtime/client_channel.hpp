#pragma once
// The client's end of the wire to one worker (the worker's end is worker.cpp): the handshake,
// the frames the client sends (calls, controls, the layout) and the worker's frames decoded into
// messages. It knows nothing of pools or scheduling.
//
// The rules live here without I/O (ClientHandshake, decode_incoming, encode_call), so that two
// drivers share them: ClientChannel over a blocking Transport (a node's worker talking to its
// per-GPU worker processes), and the pool's NodeConnection over an io::Stream on the I/O core.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "io/transport.hpp"
#include "metrics/metrics.hpp"
#include "runtime/auth.hpp"
#include "runtime/preemption.hpp"
#include "runtime/protocol.hpp"
#include "sky/detail/call.hpp"

namespace sky::detail {

/// Bytes to write to one node: small frames copied, large argument buffers referenced (a
/// broadcast's arguments are sent to every node from one buffer).
struct Outgoing {
    Buffer small;
    std::vector<std::pair<std::size_t, std::shared_ptr<const Buffer>>> big;
    [[nodiscard]] bool empty() const noexcept { return small.empty() && big.empty(); }
    void clear() noexcept {
        small.clear();
        big.clear();
    }
};

/// Appends the frame of call `call_id` to `out`; `worker` is the local rank a per-rank call of a
/// distributed plugin is for (-1: any).
void encode_call(Outgoing& out, std::uint64_t call_id, const CallDesc& call, int worker);

/// A frame from a serving worker, decoded on the reader's thread.
struct Incoming {
    MsgType type = MsgType::heartbeat;
    std::uint64_t call_id = 0;
    Buffer payload;   ///< result: the encoded result
    ErrorMsg error;   ///< error
    LogMsg log;       ///< log (call_id 0: not printed by a call)
    Metrics metrics;  ///< metrics (instance_id and node empty: the caller knows them)
    std::optional<std::int64_t> progress;  ///< progress: the latest step (empty: none now)
    std::optional<NodeNotice> notice;      ///< notice: what the node's provider warned of
};

/// Decodes a serving worker's frame into `in`. Throws ProtocolError on a frame that is malformed
/// or that a worker never sends.
void decode_incoming(Frame& f, Incoming& in);

class ClientChannel {
public:
    /// What the handshake sends and how long it waits.
    struct Handshake {
        std::string token;  ///< the worker proves it holds it; it never travels
        /// The stream crosses a network sky does not otherwise encrypt: a worker that does not
        /// seal it (runtime/auth.hpp) is refused.
        bool seal = false;
        ClientHello hello;
        /// How long the worker may take to authenticate and send its hello.
        std::chrono::seconds hello_bound{60};
        /// How long it may take to start its worker processes and answer "ready".
        std::chrono::seconds ready_bound{120};
        /// Lines the worker prints before it is ready (a pip install, a slow start).
        std::function<void(LogMsg)> on_log;
        /// The largest frame accepted once the worker is ready.
        std::uint64_t max_frame = default_max_frame;
    };

    /// `name` prefixes every error ("node 1 (i-0abc)").
    ClientChannel(std::unique_ptr<Transport> transport, std::string name);

    /// Authenticates the worker, checks its hello (protocol and build), sends the client's
    /// hello and waits for the worker's ready frame. Throws ProtocolError for a worker that
    /// fails authentication or breaks the protocol, sky::Error for one that is silent past a
    /// bound or closes the connection.
    WorkerReady handshake(const Handshake& h);

    /// The next frame of a serving worker; false on a clean end of the stream. Throws
    /// ProtocolError on a frame that is malformed or unexpected, sky::Error when the transport
    /// fails. One reader thread at a time, after handshake().
    bool next(Incoming& in);
    /// The next frame as it came, undecoded (a worker relays its worker processes' frames);
    /// false on a clean end of the stream.
    bool next_frame(Frame& f);
    /// True when next() will not block (a whole frame is buffered): the reader delivers what
    /// it has before it waits again.
    [[nodiscard]] bool has_buffered() const noexcept;

    /// Writes `out` (callers serialise writers).
    void write(const Outgoing& out);
    /// Writes one frame without a payload (heartbeat, cancel, shutdown).
    void write_control(MsgType type, std::uint64_t call_id);
    /// Writes one frame whose payload is `payload` (not copied).
    void write_frame(MsgType type, std::span<const std::byte> payload, std::uint64_t call_id = 0,
                     std::uint16_t flags = 0);
    /// Ends the stream both ways: a blocked next() returns. Never throws.
    void shutdown() noexcept { transport_->shutdown(); }

private:
    void write_bytes(std::span<const std::byte> bytes);

    std::unique_ptr<Transport> transport_;
    std::string name_;
    std::unique_ptr<FrameReader> frames_;
    Frame frame_;
};

/// The client's side of the handshake as steps, without I/O: each frame from the worker goes
/// in, the bytes to answer with come out, and the driver waits for the next frame no longer than
/// deadline(). Authentication (runtime/auth.hpp), the worker's hello checked (protocol, build),
/// the client's hello sent, then log lines and heartbeats until the worker's ready frame. Every
/// error names the connection: ProtocolError for a worker that fails authentication or breaks
/// the protocol, sky::Error for one that is silent past a bound or ends the stream.
class ClientHandshake {
public:
    using Clock = std::chrono::steady_clock;
    /// `name` prefixes every error ("node 1 (i-0abc)"); the first wait starts at `now`.
    ClientHandshake(ClientChannel::Handshake h, std::string name, Clock::time_point now);

    /// The largest frame the next step accepts (64 bytes until the worker is authenticated).
    [[nodiscard]] std::uint64_t frame_limit() const noexcept;
    /// When waiting for the next frame ends in timed_out().
    [[nodiscard]] Clock::time_point deadline() const noexcept { return deadline_; }
    /// Takes the worker's next frame; returns the bytes to send back (often none).
    Buffer on_frame(const Frame& f, Clock::time_point now);
    /// True once the worker's ready frame was checked: ready() holds it.
    [[nodiscard]] bool done() const noexcept { return stage_ == Stage::done; }
    [[nodiscard]] const WorkerReady& ready() const noexcept { return ready_; }
    /// Once the worker's proof is checked: the sealed stream's keys, when the worker seals.
    /// Every byte after the proof, both ways, then travels sealed (io/sealed.hpp): the driver
    /// turns its stream's cipher on before it reads or writes anything else. Taken once.
    [[nodiscard]] std::optional<io::SealKeys> take_keys() noexcept {
        return stage_ == Stage::hello ? std::exchange(answer_.keys, std::nullopt) : std::nullopt;
    }

    /// Throws the error for a frame the reader could not decode (its ProtocolError `e`).
    [[noreturn]] void bad_frame(const std::exception& e) const;
    /// Throws the error for a stream that ended before the handshake did.
    [[noreturn]] void ended() const;
    /// Throws the error for a wait that reached deadline().
    [[noreturn]] void timed_out() const;
    /// Throws the error for a transport that failed (`why`).
    [[noreturn]] void failed(const std::string& why) const;

private:
    enum class Stage { challenge, proof, hello, ready, done };
    ClientChannel::Handshake h_;
    std::string name_;
    Stage stage_ = Stage::challenge;
    Clock::time_point deadline_;
    ClientAuthAnswer answer_;
    WorkerReady ready_;
};

}  // namespace sky::detail
