#pragma once
// The wire protocol: length-prefixed frames (a fixed 24-byte header, then the payload) and the
// messages they carry. See docs/architecture.md, "Wire protocol".
#include <bit>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "io/transport.hpp"
#include "sky/detail/buffer.hpp"

namespace sky::detail {

static_assert(std::endian::native == std::endian::little,
              "the frame header is little-endian; big-endian hosts need byte swaps here");

inline constexpr std::uint32_t frame_magic = 0x31594b53;  // "SKY1"
// 2: mutual challenge-response (auth frames) before the hellos; no token in any hello.
// 3: the worker's ready frame after the client's hello, the layout frame, calls with a plugin.
// 4: started/confirm (at most once), ack and resume (a dropped connection loses nothing).
// 5: progress (worker -> client) and preempt (client -> worker) frames: a preemption notice.
// 6: the layout names the node of each position (an elastic pool's indexes have gaps);
//    notice (worker -> client) frames: a warning the node learned of from its provider.
inline constexpr std::uint8_t protocol_version = 6;
inline constexpr std::size_t frame_header_size = 24;
/// Default upper bound of one frame's payload; larger frames close the connection.
inline constexpr std::uint64_t default_max_frame = std::uint64_t{2} << 30;  // 2 GiB

enum class MsgType : std::uint8_t {
    hello = 1,      // both ways, first frame: ClientHello / WorkerHello
    call = 2,       // client -> worker: CallHeader + argument bytes
    result = 3,     // worker -> client: result bytes
    error = 4,      // worker -> client: ErrorMsg
    log = 5,        // worker -> client: LogMsg (call id 0: not inside a call)
    metrics = 6,    // worker -> client: sky::Metrics (its numbers)
    heartbeat = 7,  // both ways, empty
    cancel = 8,     // client -> worker, empty: drop the call if it has not started
    shutdown = 9,   // client -> worker, empty: finish and exit
    auth = 10,      // both ways, before the hellos, fixed sizes (runtime/auth.hpp)
    ready = 11,     // worker -> client, after the client's hello: WorkerReady
    layout = 12,    // client -> worker: PoolLayout (before the first call, again after a restart)
    started = 13,   // worker -> client, empty: the call is about to run
    confirm = 14,   // client -> worker, empty: run the at-most-once call that said "started"
    ack = 15,       // client -> worker: AckMsg, results and errors the client has received
    progress = 16,  // worker -> client: [i64 step], the latest sky::progress; empty: none now
    preempt = 17,   // client -> worker: PreemptMsg, the notice that stands; empty: none stands
    notice = 18,    // worker -> client: NoticeMsg, the provider warned the node it is reclaimed
};

/// FrameHeader::flags of a call frame: the payload starts with a plugin block (CallPlugin).
inline constexpr std::uint16_t call_flag_plugin = 1;
/// FrameHeader::flags of a call frame: run it at most once. The worker sends "started" and waits
/// for the client's "confirm" before the function runs (a "cancel" instead drops it), so the
/// function never runs unless the client already counts the call as started.
inline constexpr std::uint16_t call_flag_at_most_once = 2;
[[nodiscard]] const char* msg_type_name(MsgType t) noexcept;

struct FrameHeader {
    std::uint32_t magic = frame_magic;
    std::uint8_t version = protocol_version;
    MsgType type = MsgType::heartbeat;
    std::uint16_t flags = 0;
    std::uint64_t call_id = 0;
    std::uint64_t length = 0;
};

/// Writes a header into 24 bytes.
inline void encode_header(std::byte* out, MsgType type, std::uint64_t call_id, std::uint64_t length,
                          std::uint16_t flags = 0) noexcept {
    FrameHeader h;
    h.type = type;
    h.flags = flags;
    h.call_id = call_id;
    h.length = length;
    std::memcpy(out, &h.magic, 4);
    std::memcpy(out + 4, &h.version, 1);
    std::memcpy(out + 5, &h.type, 1);
    std::memcpy(out + 6, &h.flags, 2);
    std::memcpy(out + 8, &h.call_id, 8);
    std::memcpy(out + 16, &h.length, 8);
}
/// Appends a whole frame (header + payload) to `out`.
inline void append_frame(Buffer& out, MsgType type, std::uint64_t call_id,
                         std::span<const std::byte> payload) {
    std::size_t at = out.size();
    out.resize(at + frame_header_size);
    encode_header(out.data() + at, type, call_id, payload.size());
    out.append(payload.data(), payload.size());
}
/// Decodes and checks a header; throws ProtocolError naming what is wrong.
FrameHeader decode_header(const std::byte* in, std::uint64_t max_frame);

/// A received frame. The payload points into the reader's buffer (valid until the next call
/// to next()) or into `owned` for large frames.
struct Frame {
    FrameHeader header;
    std::span<const std::byte> payload;
    Buffer owned;
    /// The payload as a Buffer of its own (moves `owned` when it holds it).
    Buffer take_payload() {
        if (owned.size() == payload.size() && owned.data() == payload.data())
            return std::move(owned);
        Buffer b;
        b.append(payload.data(), payload.size());
        return b;
    }
};

/// Reads frames from a transport, many per read when they are small.
class FrameReader {
public:
    explicit FrameReader(Transport& t, std::uint64_t max_frame = default_max_frame)
        : t_(t), max_frame_(max_frame) {}
    /// Takes over another reader's buffered bytes with a new frame limit.
    FrameReader(FrameReader&& o, std::uint64_t max_frame)
        : t_(o.t_), max_frame_(max_frame), buf_(std::move(o.buf_)), pos_(o.pos_) {}
    /// Next frame; false on a clean end of stream between frames. Throws ProtocolError on a
    /// bad header or a stream that ends inside a frame, sky::Error on transport failure.
    bool next(Frame& f);
    /// True when a whole frame is already buffered (next() will not block).
    [[nodiscard]] bool has_buffered_frame() const noexcept;
    /// Takes the bytes read past the last frame (a sealed stream's first records, read with
    /// the handshake's last clear frame); the reader is empty after.
    [[nodiscard]] std::vector<std::byte> take_buffered();

private:
    bool fill(std::size_t need);
    Transport& t_;
    std::uint64_t max_frame_;
    Buffer buf_;
    std::size_t pos_ = 0;
};

/// Call payload: [u16 name length][name][0-7 zero bytes][u64 signature][argument bytes]; the
/// padding puts the signature and the arguments at a multiple of 8 bytes, so large numeric
/// arguments can be read in place.
inline constexpr std::size_t call_header_size(std::size_t name_length) noexcept {
    return (2 + name_length + 7) / 8 * 8 + 8;
}
struct CallHeader {
    std::string_view function;
    std::uint64_t signature = 0;
    std::span<const std::byte> args;
};
void append_call_header(Buffer& out, std::string_view function, std::uint64_t signature);
CallHeader decode_call(std::span<const std::byte> payload);

/// The plugin block of a call frame with call_flag_plugin: [u32 n][n bytes: cereal CallPlugin]
/// [0-7 zero bytes], so that the call payload after it stays 8-byte aligned.
struct CallPlugin {
    std::uint8_t kind = 0;  ///< PluginSpec::Kind
    std::string backend;
    std::int32_t worker = -1;  ///< the worker process (local rank) that must run it; -1: any

    template <class A>
    void serialize(A& ar) {
        ar(kind, backend, worker);
    }
};
void append_call_plugin(Buffer& out, const CallPlugin& plugin);
/// Splits a call payload into its plugin block (when `flags` has call_flag_plugin) and the rest.
/// Throws ProtocolError when the block is malformed.
std::span<const std::byte> decode_call_plugin(std::span<const std::byte> payload,
                                              std::uint16_t flags, CallPlugin& plugin);

/// Log payload: [u8 stream][f64 timestamp][line bytes].
struct LogMsg {
    std::uint8_t stream = 1;  // 1 stdout, 2 stderr
    double timestamp = 0;
    std::string line;
};
void append_log_frame(Buffer& out, std::uint64_t call_id, std::uint8_t stream, double timestamp,
                      std::string_view line);
LogMsg decode_log(std::span<const std::byte> payload);

/// Error payload.
struct ErrorMsg {
    enum Kind : std::uint8_t {
        exception = 1,           // the function threw
        unknown_function = 2,    // no function of that name
        signature_mismatch = 3,  // the name exists with another signature
        bad_arguments = 4,       // the argument bytes did not decode
        cancelled = 5,           // cancelled before it started
    };
    std::uint8_t kind = exception;
    std::string type_name;
    std::string message;
    std::vector<std::string> log_tail;

    template <class A>
    void serialize(A& ar) {
        ar(kind, type_name, message, log_tail);
    }
};

/// Metrics payload: a sky::Metrics event's numbers, by cereal (metrics/metrics.hpp).

/// Ack payload: the call ids, [u64 id]..., of result and error frames the client received; the
/// worker forgets them (it keeps the others to send again after a resume).
void append_ack_frame(Buffer& out, std::span<const std::uint64_t> call_ids);
/// The ids of an ack payload; throws ProtocolError when its size is not a multiple of 8.
std::vector<std::uint64_t> decode_ack(std::span<const std::byte> payload);

/// Progress payload: the latest step sky::progress recorded in the worker (8 bytes), or none
/// (empty: no call of the worker reports progress any more).
void append_progress_frame(Buffer& out, std::optional<std::int64_t> step);
/// Throws ProtocolError when the payload is neither empty nor 8 bytes.
std::optional<std::int64_t> decode_progress(std::span<const std::byte> payload);

/// Preempt payload: the preemption notice that stands for the pool (sky::Preemption, api.md
/// §10a); an empty payload withdraws it.
struct PreemptMsg {
    std::int64_t deadline_ms = 0;  ///< the cloud's deadline, ms since the Unix epoch
    std::int32_t node = 0;
    std::string instance_id;
    std::string reason;
    std::int64_t checkpoint_step = -1;

    template <class A>
    void serialize(A& ar) {
        ar(deadline_ms, node, instance_id, reason, checkpoint_step);
    }
};

/// Notice payload: a warning the node learned of on its own (its launcher's preemption probe,
/// a Slurm signal), which the client turns into a PreemptionNotice (api.md §10a).
struct NoticeMsg {
    std::int64_t deadline_ms = 0;  ///< when the provider takes the machine, ms since the epoch
    /// True: the machine goes at the deadline; false: a softer warning (AWS's rebalance
    /// recommendation), the deadline the earliest it could go.
    bool firm = true;
    std::string reason;  ///< the provider's words

    template <class A>
    void serialize(A& ar) {
        ar(deadline_ms, firm, reason);
    }
};

/// The client's hello (after authentication): who the worker is in the pool.
struct ClientHello {
    std::uint32_t protocol = protocol_version;
    std::string pool_id;
    std::string instance_id;
    std::int32_t node = 0;
    std::int32_t total_nodes = 1;
    std::int32_t concurrency = 1;
    std::string head_addr;
    std::int32_t head_port = 0;
    std::vector<std::string> accelerators;
    std::int64_t idle_timeout_s = 600;
    std::int64_t hard_timeout_s = 3600;
    bool collect_metrics = false;
    std::int64_t metrics_interval_ms = 5000;
    std::uint64_t max_frame = default_max_frame;
    /// The pool's accelerator in Accelerator::parse syntax (lossless); empty: none asked for,
    /// the worker detects it (nvidia-smi).
    std::string accelerator;
    std::string private_addr;  ///< this node's address on the pool's private network
    /// -1: a node's worker, which starts one worker process per GPU or MIG slice when there are
    /// several. k >= 0: worker process k of `workers` that a node's worker started.
    std::int32_t worker = -1;
    std::int32_t workers = 1;
    /// The same for every connection of one client to this worker (random): a connection that
    /// resumes a session must name it.
    std::string session;
    /// False on a client's first connection; true when it comes back after a dropped one.
    bool resume = false;
    /// How long a worker listening for its client (not a Local one) waits for it to come back
    /// after the connection dropped, running its calls and keeping their results; 0: it does
    /// not wait (it ends as when the client said shutdown, its running calls abandoned).
    std::int64_t reconnect_bound_s = 30;
    /// Variables the worker sets in its environment on the first connection, before its worker
    /// processes start (names and values in order): the pool's environment where the node's
    /// launch crosses a network in clear and this stream is sealed (Slurm).
    std::vector<std::string> env_names;
    std::vector<std::string> env_values;

    template <class A>
    void serialize(A& ar) {
        ar(protocol, pool_id, instance_id, node, total_nodes, concurrency, head_addr, head_port,
           accelerators, idle_timeout_s, hard_timeout_s, collect_metrics, metrics_interval_ms,
           max_frame, accelerator, private_addr, worker, workers, session, resume,
           reconnect_bound_s, env_names, env_values);
    }
};

/// The worker's answer to the client's hello, once its worker processes run.
struct WorkerReady {
    std::int32_t workers = 1;  ///< worker processes on this node (W): one per GPU or MIG slice
    std::string accelerator;   ///< the node's accelerator (Accelerator::parse syntax); may be ""
    /// A port free on this node per worker process, picked at hello time: the head's first is
    /// MASTER_PORT, and each rank's own is its TF_CONFIG port.
    std::vector<std::int32_t> ports;
    std::vector<std::string> devices;  ///< CUDA_VISIBLE_DEVICES of each worker process

    template <class A>
    void serialize(A& ar) {
        ar(workers, accelerator, ports, devices);
    }
};

/// Where every rank of the pool is: sent to every node before the first call, again when one
/// was replaced, and when a distributed call freezes the world. Its positions are the nodes of
/// the world (lowest index first), which on an elastic pool need not be 0..n-1: `nodes` names
/// the node at each position, and a rank's NODE_RANK is its node's position.
struct PoolLayout {
    std::vector<std::string> peers;                ///< private address per position
    std::vector<std::int32_t> workers;             ///< W per position
    std::vector<std::vector<std::int32_t>> ports;  ///< per position, per worker process
    /// The node index at each position (empty: position = node index).
    std::vector<std::int32_t> nodes;

    template <class A>
    void serialize(A& ar) {
        ar(peers, workers, ports, nodes);
    }
};

/// The worker's hello (after authentication): what it is and what it can run.
struct WorkerHello {
    std::uint32_t protocol = protocol_version;
    std::string build_id;
    std::int64_t pid = 0;
    std::string hostname;
    std::vector<std::pair<std::string, std::uint64_t>> functions;

    template <class A>
    void serialize(A& ar) {
        ar(protocol, build_id, pid, hostname, functions);
    }
};

/// A stable identity of this executable (its GNU build id, else a hash of the file).
const std::string& self_build_id();

/// Seconds since the Unix epoch.
double unix_now() noexcept;

}  // namespace sky::detail
