#pragma once
// Inside the SSH layer: a session's state on its strand, the operations the strand steps, and
// the helpers every operation uses. Only src/ssh/ includes this.
//
// Two libssh2 rules shape the pump (pump.cpp):
//  * A call that returned EAGAIN with a packet half sent (block direction OUTBOUND) must be
//    repeated, with the same arguments, before any other call may send (libssh2 keeps one pending
//    outgoing packet per session). The op that owns the pending packet is the only one stepped
//    until it completes (send_owner).
//  * Channel opens (exec, SFTP, tunnels) share one session-wide state machine: one at a time
//    (opener).
#include <libssh2.h>
#include <libssh2_sftp.h>

#include <atomic>
#include <boost/asio/append.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/system/error_code.hpp>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "io/blocking_stream.hpp"
#include "ssh/session.hpp"

namespace sky::detail::ssh {

using Clock = std::chrono::steady_clock;
using Strand = boost::asio::strand<boost::asio::io_context::executor_type>;

/// What one step of an operation achieved: finished, moved on, or waits (for the socket, the
/// caller, or another op holding the session's send or open slot).
enum class Step { done, progress, idle };

/// Why an operation failed; raised on the caller's thread or handed to a handler.
struct Failure {
    enum Kind { none, lost, channel, timeout } kind = none;
    std::string message;
    [[noreturn]] void raise() const;
    [[nodiscard]] std::exception_ptr exception() const;
};

/// libssh2's last error message of the session.
std::string session_error(LIBSSH2_SESSION* s);
/// Errors that end one operation but leave the session usable.
bool channel_level(int rc);

/// One piece of work on the strand: an exec, an upload, a probe, a tunnel.
struct Op : std::enable_shared_from_this<Op> {
    virtual ~Op() = default;
    /// Strand, once, when the op joins the session (timers start here).
    virtual void start(Session::Impl& s) { (void)s; }
    /// Strand: makes progress with libssh2 calls.
    virtual Step step(Session::Impl& s) = 0;
    /// Strand, when the session ends and every send fails at once: frees what libssh2 cannot
    /// free on its own (an SFTP handle; libssh2_session_free knows only channels).
    virtual void release(Session::Impl& s) { (void)s; }
    /// Strand, when the session ends: drop libssh2 objects without calling libssh2 and complete
    /// with the failure.
    virtual void abort(const Failure& f) = 0;
};

struct Session::Impl : std::enable_shared_from_this<Session::Impl> {
    explicit Impl(SessionOptions options);
    ~Impl();

    // Set while connecting, read-only once the session is handed out.
    SessionOptions opts;
    std::string label;  // "root@10.0.0.2:22"
    std::string fingerprint;

    Strand strand;
    boost::asio::posix::stream_descriptor sock;
    boost::asio::steady_timer keepalive_timer;
    LIBSSH2_SESSION* s = nullptr;
    enum class Phase { connecting, up, closed } phase = Phase::connecting;
    /// While connecting: what runs when the socket is ready (the connector's next step).
    std::function<void()> connect_step;

    // Socket I/O goes through these buffers (libssh2's send/recv callbacks): libssh2 writes one
    // packet per send() and reads 16 KiB per recv(); batching packets into one send per step and
    // reading 256 KiB at a time cuts system calls on both ends of the connection.
    std::vector<char> wbuf;
    std::size_t whead = 0;
    std::unique_ptr<char[]> rbuf;
    std::size_t rhead = 0;
    std::size_t rtail = 0;
    int sock_error = 0;        // a send failed: the session is lost
    int recv_error = 0;        // a recv failed
    bool peer_closed = false;  // recv saw the end of the connection
    static constexpr std::size_t kWriteCap = 1u << 20;
    static constexpr std::size_t kFlushAt = 64u << 10;
    static constexpr std::size_t kReadBuf = 256u << 10;

    // Readiness waits on the socket; a new socket (a connect attempt) starts a new generation so
    // that the old one's cancelled waits change nothing.
    bool read_armed = false;
    bool write_armed = false;
    unsigned sock_gen = 0;

    // The operations and libssh2's ordering rules (strand).
    std::vector<std::shared_ptr<Op>> ops;
    Op* opener = nullptr;      // the op inside a channel open
    Op* send_owner = nullptr;  // the op whose call left a packet half sent
    Op* sftp_user = nullptr;   // SFTP requests share per-sftp state: one op at a time
    bool keepalive_owner = false;
    int round_dirs = 0;  // block directions seen in this round
    bool round_eagain = false;
    bool in_pump = false;
    bool pump_again = false;
    // Set while an operation is being started or the session torn down: completions are posted
    // then, never run inside the caller's call. Otherwise (the pump woken by the socket, a
    // timer or a wake) they run at once on the strand.
    bool post_completions = false;
    LIBSSH2_SFTP* sftp = nullptr;

    // Whether the server runs an sftp subsystem: asked once, before the first upload (libssh2
    // 1.10's sftp_init spins forever in non-blocking mode when the server refuses it).
    enum class Sftp { unknown, available, refused };
    std::mutex sftp_probe_m;  // one probe at a time; callers wait for its answer
    std::atomic<Sftp> sftp_support{Sftp::unknown};

    // Any thread.
    std::atomic<bool> pump_posted{false};
    std::atomic<bool> dead{false};
    Failure death;  // written on the strand before dead becomes true

    /// Any thread: the op joins the session on the strand (or fails at once if it is gone).
    void submit(std::shared_ptr<Op> op);
    /// Any thread: a pump on the strand soon (coalesced).
    void wake();
    /// Strand: steps every op until none progresses, then waits for the socket.
    void pump();
    /// Strand: ends the session (goodbye, channels and socket closed, every op failed).
    void teardown() noexcept;
    /// Any thread: teardown on the strand; waits for it unless on an I/O thread.
    void close() noexcept;
    /// Strand: records why the session died (the first reason wins).
    void die(Failure f);

    /// Strand: notes an EAGAIN so the pump waits for the right direction. True when a packet is
    /// left half sent: the caller must repeat the same call before any other call may send.
    bool eagain();
    /// Strand: whether `rc` is EAGAIN (then noted as eagain() does). An op that keeps its state
    /// repeats the same call on its next step, which is what a half-sent packet needs.
    bool would_block(long rc);
    /// Strand: after a libssh2 call that returned null (an open, an SFTP start), its error in
    /// *rc; true when that is EAGAIN (noted as would_block does).
    bool null_would_block(int* rc) {
        *rc = libssh2_session_last_errno(s);
        return would_block(*rc);
    }
    /// Strand: classifies a libssh2 error; a session-level one ends everything.
    Failure error(int rc, const std::string& what);

    /// The result of open_channel.
    enum class Open { opened, wait, failed };
    /// Strand: one step of a channel open for `op` (one open at a time per session): `type`
    /// ("session", "direct-tcpip"...), the receive window and the type's message. On `failed`,
    /// *failure says why, starting with `what`. With keep_slot the op keeps the open slot after the
    /// channel exists (an exec or subsystem request answered next; libssh2 1.10 mixes up a channel
    /// request waiting for its reply with another channel's open) and gives it back itself.
    Open open_channel(Op* op, std::string_view type, unsigned window, std::string_view message,
                      const std::string& what, LIBSSH2_CHANNEL** channel, Failure* failure,
                      bool keep_slot = false);

    // Buffered socket I/O (strand; libssh2 calls the callbacks).
    [[nodiscard]] std::size_t pending_out() const { return wbuf.size() - whead; }
    void flush();
    void pull();
    static ssize_t send_cb(libssh2_socket_t, const void* buf, std::size_t len, int flags,
                           void** abstract);
    static ssize_t recv_cb(libssh2_socket_t, void* buf, std::size_t len, int flags,
                           void** abstract);
    /// Strand: waits for the socket to become readable / writable; then the connector's step
    /// or the pump runs.
    void arm(bool read, bool write);
    /// Strand: forgets the socket's buffers and waits (a new connect attempt).
    void reset_socket_state();
    void start_keepalive();

    template <class F>
    void post(F&& f) {
        boost::asio::post(strand, std::forward<F>(f));
    }
};

/// Bytes a caller's thread hands to an op on the strand: an upload's data, or a command's
/// streamed stdin. The caller keeps a few MiB ahead of the op (feed_input).
struct Input {
    struct Chunk {
        std::vector<std::byte> owned;
        const std::byte* data = nullptr;
        std::size_t size = 0;
    };
    std::mutex mu;
    std::condition_variable cv;
    std::deque<Chunk> chunks;  // under mu
    std::size_t queued = 0;    // under mu: bytes in chunks
    std::size_t taken = 0;     // under mu: of the front chunk, by the op
    bool done = false;         // under mu: the caller has no more
    bool stopped = false;      // under mu: the op takes no more (it ended, or stdin was dropped)

    /// Strand: what the op may take next (empty: nothing now).
    std::span<const std::byte> peek();
    /// Strand: the op took n bytes of peek().
    void consume(std::size_t n);
    /// Strand: every byte taken and the caller has no more.
    bool exhausted();
    /// Strand: the op takes nothing more; the caller stops feeding.
    void stop();
};

/// Caller's thread: hands what `read` produces to `input`, about 8 MiB ahead of the op
/// (bounded memory, overlapped I/O), until the end or until the op stops taking it. Returns the
/// source's exception, if it threw (the input is then marked done).
std::exception_ptr feed_input(Session::Impl& im, Input& input, const Session::UploadSource& read,
                              const std::function<void(std::uint64_t)>& on_progress);

/// Caller's thread: runs `command` with its stdin taken from `input`, calls `feed` (which fills
/// the input) once the command is submitted, then waits for the command's end.
ExecResult exec_with_input(Session::Impl& im, std::string_view command,
                           const std::shared_ptr<Input>& input, const std::function<void()>& feed,
                           const ExecOptions& options);

/// Hands `args` to `handler` on its associated executor (else the strand), never inside the
/// current call.
template <class Handler, class... Args>
void complete_later(const Strand& strand, Handler&& handler, Args&&... args) {
    boost::asio::post(
        strand, boost::asio::append(std::forward<Handler>(handler), std::forward<Args>(args)...));
}

/// Waits on the calling thread for what a strand hands over; refuses I/O threads.
template <class T>
class Waiter {
public:
    explicit Waiter(std::string_view what) { io::forbid_blocking_on_io_thread(what); }
    void set(T value) {
        std::lock_guard lk(m_);
        value_ = std::move(value);
        cv_.notify_all();
    }
    void fail(std::exception_ptr e) {
        std::lock_guard lk(m_);
        error_ = std::move(e);
        cv_.notify_all();
    }
    T get() {
        std::unique_lock lk(m_);
        cv_.wait(lk, [&] { return value_.has_value() || error_; });
        if (error_) std::rethrow_exception(error_);
        return std::move(*value_);
    }

private:
    std::mutex m_;
    std::condition_variable cv_;
    std::optional<T> value_;
    std::exception_ptr error_;
};

}  // namespace sky::detail::ssh
