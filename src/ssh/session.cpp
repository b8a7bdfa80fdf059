// The SSH session: connect/handshake/auth in blocking mode with a deadline, then a pump thread
// that owns every libssh2 call on a non-blocking session.
//
// Two libssh2 rules shape the pump:
//  * A call that returned EAGAIN with a packet half sent (block direction OUTBOUND) must be
//    repeated, with the same arguments, before any other call may send (libssh2 keeps one pending
//    outgoing packet per session). The op that owns the pending packet is the only one stepped
//    until it completes.
//  * Channel opens (exec, SFTP, tunnels) share one session-wide state machine: one at a time.
#include "ssh/session.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <libssh2.h>
#include <libssh2_sftp.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "ssh/host_key.hpp"
#include "util/random.hpp"
#include "util/shell.hpp"

namespace sky::detail::ssh {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

void global_init() {
    // libssh2_init is not thread-safe; run it once. libssh2_exit is never called: static
    // destruction order would make it race sessions still closing.
    static std::once_flag once;
    std::call_once(once, [] {
        if (libssh2_init(0) != 0) throw SshError("libssh2 initialisation failed");
    });
}

std::string session_error(LIBSSH2_SESSION* s) {
    char* msg = nullptr;
    int len = 0;
    libssh2_session_last_error(s, &msg, &len, 0);
    return msg ? std::string(msg, static_cast<std::size_t>(len)) : std::string("unknown error");
}

// Errors that end one operation but leave the session usable.
bool channel_level(int rc) {
    switch (rc) {
        case LIBSSH2_ERROR_CHANNEL_FAILURE:
        case LIBSSH2_ERROR_CHANNEL_REQUEST_DENIED:
        case LIBSSH2_ERROR_CHANNEL_UNKNOWN:
        case LIBSSH2_ERROR_CHANNEL_WINDOW_EXCEEDED:
        case LIBSSH2_ERROR_CHANNEL_PACKET_EXCEEDED:
        case LIBSSH2_ERROR_CHANNEL_CLOSED:
        case LIBSSH2_ERROR_CHANNEL_EOF_SENT:
        case LIBSSH2_ERROR_SFTP_PROTOCOL:
        case LIBSSH2_ERROR_FILE:
        case LIBSSH2_ERROR_INVAL:
            return true;
        default:
            return false;
    }
}

const char* sftp_error_name(unsigned long code) {
    switch (code) {
        case LIBSSH2_FX_NO_SUCH_FILE:
            return "no such file";
        case LIBSSH2_FX_PERMISSION_DENIED:
            return "permission denied";
        case LIBSSH2_FX_FAILURE:
            return "failure";
        case LIBSSH2_FX_NO_SUCH_PATH:
            return "no such path";
        case LIBSSH2_FX_FILE_ALREADY_EXISTS:
            return "file already exists";
        case LIBSSH2_FX_WRITE_PROTECT:
            return "write protected";
        case LIBSSH2_FX_NO_SPACE_ON_FILESYSTEM:
            return "no space on file system";
        case LIBSSH2_FX_QUOTA_EXCEEDED:
            return "quota exceeded";
        case LIBSSH2_FX_NOT_A_DIRECTORY:
            return "not a directory";
        default:
            return "sftp error";
    }
}

long ms_left(Clock::time_point deadline) {
    return std::max<long>(
        0, std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count());
}

// A byte ring for one producer and one consumer. The producer fills free space without the
// lock (the consumer never touches it) and publishes under the lock; likewise the consumer.
class Ring {
public:
    explicit Ring(std::size_t cap) : data_(new std::byte[cap]), cap_(cap) {}
    // Contiguous free space after the filled region. Caller holds the lock.
    std::span<std::byte> free_span() {
        std::size_t tail = (head_ + size_) % cap_;
        std::size_t n = std::min(cap_ - size_, cap_ - tail);
        return {data_.get() + tail, n};
    }
    std::span<std::byte> filled_span() {
        return {data_.get() + head_, std::min(size_, cap_ - head_)};
    }
    void commit(std::size_t n) { size_ += n; }
    void consume(std::size_t n) {
        head_ = (head_ + n) % cap_;
        size_ -= n;
        // No rewind to 0 when empty: the producer may be filling the free span right now.
    }
    [[nodiscard]] std::size_t size() const { return size_; }
    [[nodiscard]] std::size_t space() const { return cap_ - size_; }

private:
    std::unique_ptr<std::byte[]> data_;
    std::size_t cap_;
    std::size_t head_ = 0;
    std::size_t size_ = 0;
};

enum class Step { done, progress, idle };

// Why an operation failed, thrown on the caller's thread.
struct Failure {
    enum Kind { none, lost, channel, timeout } kind = none;
    std::string message;
    [[noreturn]] void raise() const {
        switch (kind) {
            case lost:
                throw ConnectionLost(message);
            case timeout:
                throw sky::TimeoutError(message);
            default:
                throw ChannelError(message);
        }
    }
};

}  // namespace

// ------------------------------------------------------------------------------------------------

struct Op {
    virtual ~Op() = default;
    /// Pump thread: makes progress with libssh2 calls.
    virtual Step step(Session::Impl& s) = 0;
    /// Pump thread, when the session ends: drop libssh2 objects without calling libssh2 and
    /// wake the caller with the failure.
    virtual void abort(const Failure& f) = 0;
};

struct Session::Impl {
    SessionOptions opts;
    std::string label;  // "root@10.0.0.2:22"
    std::string fingerprint;
    int sock = -1;
    // Socket I/O goes through these buffers (libssh2 send/recv callbacks, installed once the
    // session is non-blocking): libssh2 writes one packet per send() and reads 16 KiB per recv();
    // batching packets into one send per pump step and reading 256 KiB at a time cuts system
    // calls on both ends of the connection.
    std::vector<char> wbuf;
    std::size_t whead = 0;
    std::unique_ptr<char[]> rbuf;
    std::size_t rhead = 0;
    std::size_t rtail = 0;
    int sock_error = 0;
    static constexpr std::size_t kWriteCap = 1u << 20;
    static constexpr std::size_t kFlushAt = 64u << 10;
    static constexpr std::size_t kReadBuf = 256u << 10;
    int wake_fd = -1;
    LIBSSH2_SESSION* s = nullptr;
    LIBSSH2_SFTP* sftp = nullptr;
    Op* sftp_user = nullptr;  // SFTP requests share per-sftp state: one op at a time
    // Whether the server runs an sftp subsystem: asked once, before the first upload (libssh2
    // 1.10's sftp_init spins forever in non-blocking mode when the server refuses it).
    enum class Sftp { unknown, available, refused };
    std::mutex sftp_probe_m;  // one probe at a time; callers wait for its answer
    std::atomic<Sftp> sftp_support{Sftp::unknown};
    Op* opener = nullptr;  // the op inside a channel open
    Op* send_owner = nullptr;
    bool keepalive_owner = false;
    int round_dirs = 0;  // block directions seen in this round
    bool round_eagain = false;

    std::thread pump;
    std::mutex mu;
    std::vector<std::shared_ptr<Op>> incoming;  // guarded by mu
    bool closing = false;                       // guarded by mu
    std::atomic<bool> dead{false};
    std::atomic<bool> wake_pending{false};
    Failure death;  // set before dead becomes true

    ~Impl() {
        close();
        // Closed last: a Transport may still wake() a session that is gone.
        if (wake_fd >= 0) ::close(wake_fd);
    }

    void wake() {
        if (!wake_pending.exchange(true)) {
            std::uint64_t one = 1;
            [[maybe_unused]] auto n = ::write(wake_fd, &one, sizeof one);
        }
    }

    void submit(std::shared_ptr<Op> op) {
        {
            std::lock_guard lk(mu);
            if (closing || dead) throw ConnectionLost("ssh " + label + ": session closed");
            incoming.push_back(std::move(op));
        }
        wake();
    }

    // Pump thread: bytes libssh2 handed us that the socket has not taken yet.
    [[nodiscard]] std::size_t pending_out() const { return wbuf.size() - whead; }

    // Pump thread: sends what the buffer holds, as far as the socket takes it.
    void flush() {
        while (pending_out() > 0 && sock_error == 0) {
            ssize_t n = ::send(sock, wbuf.data() + whead, pending_out(), MSG_NOSIGNAL);
            if (n > 0) {
                whead += static_cast<std::size_t>(n);
            } else if (n < 0 && errno == EINTR) {
                continue;
            } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                break;
            } else {
                sock_error = n < 0 ? errno : EPIPE;
            }
        }
        if (whead == wbuf.size()) {
            wbuf.clear();
            whead = 0;
        } else if (whead >= kWriteCap) {
            wbuf.erase(wbuf.begin(), wbuf.begin() + static_cast<std::ptrdiff_t>(whead));
            whead = 0;
        }
    }

    static ssize_t send_cb(libssh2_socket_t, const void* buf, std::size_t len, int,
                           void** abstract) {
        auto* im = static_cast<Impl*>(*abstract);
        if (im->sock_error) return -im->sock_error;
        if (im->pending_out() >= kWriteCap) {
            im->flush();
            if (im->sock_error) return -im->sock_error;
            if (im->pending_out() >= kWriteCap) return -EAGAIN;  // libssh2 retries it later
        }
        const char* p = static_cast<const char*>(buf);
        im->wbuf.insert(im->wbuf.end(), p, p + len);
        // Batch a few packets per send, not a whole step's worth: the server works on the
        // first ones while libssh2 encrypts the next.
        if (im->pending_out() >= kFlushAt) im->flush();
        return static_cast<ssize_t>(len);
    }

    static ssize_t recv_cb(libssh2_socket_t, void* buf, std::size_t len, int, void** abstract) {
        auto* im = static_cast<Impl*>(*abstract);
        if (im->rhead == im->rtail) {
            ssize_t n = ::recv(im->sock, im->rbuf.get(), kReadBuf, 0);
            if (n < 0) return -errno;
            if (n == 0) return 0;
            im->rhead = 0;
            im->rtail = static_cast<std::size_t>(n);
        }
        std::size_t n = std::min(len, im->rtail - im->rhead);
        std::memcpy(buf, im->rbuf.get() + im->rhead, n);
        im->rhead += n;
        return static_cast<ssize_t>(n);
    }

    /// Pump thread: notes an EAGAIN so the poll waits for the right direction. Returns true when
    /// a packet is left half sent: the caller must repeat the same call before any other libssh2
    /// call may send.
    bool eagain() {
        round_eagain = true;
        int dirs = libssh2_session_block_directions(s);
        round_dirs |= dirs;
        return (dirs & LIBSSH2_SESSION_BLOCK_OUTBOUND) != 0;
    }

    /// Whether a libssh2 call's result `rc` is EAGAIN (and if so, noted as eagain() does). An op
    /// whose state did not change repeats the same call on its next step, which is what a
    /// half-sent packet needs; the pump keeps it as the only sender meanwhile (send_owner).
    bool would_block(long rc) {
        if (rc != LIBSSH2_ERROR_EAGAIN) return false;
        eagain();
        return true;
    }

    // Pump thread: classifies a libssh2 error. Session-level errors end everything.
    Failure error(int rc, const std::string& what) {
        std::string msg = "ssh " + label + ": " + what + ": " + session_error(s);
        if (channel_level(rc)) return {Failure::channel, msg};
        if (!dead) {
            death = {Failure::lost,
                     "ssh " + label + ": connection lost (" + what + ": " + session_error(s) + ")"};
            dead = true;
        }
        return death;
    }

    void run();
    void teardown(std::vector<std::shared_ptr<Op>>& ops);

    void close() noexcept {
        {
            std::lock_guard lk(mu);
            closing = true;
        }
        if (wake_fd >= 0) wake();
        if (pump.joinable()) {
            if (pump.get_id() == std::this_thread::get_id()) {
                pump.detach();  // cannot happen by design; never self-join
            } else {
                pump.join();
            }
        }
        if (s) {
            libssh2_session_free(s);
            s = nullptr;
        }
        if (sock >= 0) {
            ::close(sock);
            sock = -1;
        }
    }
};

// ------------------------------------------------------------------------------------------------
// Exec

namespace {

/// Bytes a caller hands to the pump: an upload's data, or a command's streamed stdin. Guarded by
/// the op's mutex; the caller keeps about kInFlight bytes ahead of the pump.
struct InputQueue {
    struct Chunk {
        std::vector<std::byte> owned;
        const std::byte* data = nullptr;
        std::size_t size = 0;
    };
    std::deque<Chunk> chunks;
    std::size_t queued = 0;
    bool done = false;  // the caller has no more
};

struct ExecOp final : Op {
    std::string command;
    std::string stdin_data;
    bool stdin_streamed = false;  // stdin comes from `in` (upload through exec), not stdin_data
    InputQueue in;                // under mu
    std::size_t in_acked = 0;     // of in's front chunk; pump only
    // Shared with the caller.
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::pair<int, std::string>> chunks;  // (stream, bytes)
    std::size_t queued = 0;
    bool finished = false;
    bool cancel = false;
    bool stdin_dropped = false;  // the command ended before reading all of a streamed stdin
    Failure failure;
    int exit_status = -1;
    std::string exit_signal;

    // Pump only.
    enum { opening, starting, streaming, closing, freeing } state = opening;
    enum class Call { none, write, eof, read } owner_call = Call::none;
    int owner_stream = 0;
    bool stdin_done = false;  // written (or abandoned because the command ended)
    bool eof_sent = false;
    LIBSSH2_CHANNEL* ch = nullptr;
    std::size_t stdin_off = 0;
    bool eof[2] = {false, false};
    static constexpr std::size_t kQueueLimit = 4u << 20;

    void finish(Failure f = {}) {
        std::lock_guard lk(mu);
        finished = true;
        if (f.kind != Failure::none && failure.kind == Failure::none) failure = std::move(f);
        cv.notify_all();
    }
    void abort(const Failure& f) override {
        ch = nullptr;
        finish(f);
    }
    bool cancelled() {
        std::lock_guard lk(mu);
        return cancel;
    }

    // What to write to the command's stdin next (empty: nothing now, or nothing more).
    std::span<const std::byte> next_stdin() {
        if (!stdin_streamed)
            return std::as_bytes(std::span(stdin_data))
                .subspan(std::min(stdin_off, stdin_data.size()));
        std::lock_guard lk(mu);
        if (in.chunks.empty()) return {};
        const auto& c = in.chunks.front();
        return {c.data + in_acked, c.size - in_acked};
    }
    void consume_stdin(std::size_t n) {
        if (!stdin_streamed) {
            stdin_off += n;
            return;
        }
        std::lock_guard lk(mu);
        in_acked += n;
        if (in_acked == in.chunks.front().size) {
            in_acked = 0;
            in.queued -= in.chunks.front().size;
            in.chunks.pop_front();
            cv.notify_all();
        }
    }
    void drop_stdin() {
        stdin_off = stdin_data.size();
        if (!stdin_streamed) return;
        std::lock_guard lk(mu);
        stdin_dropped = true;
        in.chunks.clear();
        in.queued = 0;
        in_acked = 0;
        cv.notify_all();
    }
    bool stdin_exhausted() {
        if (!stdin_streamed) return stdin_off >= stdin_data.size();
        std::lock_guard lk(mu);
        return stdin_dropped || (in.done && in.chunks.empty());
    }

    // Stdin and output move together: a command that writes much before reading its stdin
    // must not deadlock against us. A call that left a packet half sent is repeated first.
    Step stream(Session::Impl& s) {
        bool progressed = false;
        bool owner = s.send_owner == this;
        Call redo = owner ? owner_call : Call::none;
        owner_call = Call::none;
        if (!stdin_done && (redo == Call::none || redo == Call::write)) {
            for (int i = 0; i < 64; ++i) {
                std::span<const std::byte> piece = next_stdin();
                if (piece.empty()) break;
                if (libssh2_channel_eof(ch) == 1 && redo != Call::write) {
                    drop_stdin();  // the command is gone; its stdin too
                    break;
                }
                ssize_t n = libssh2_channel_write(ch, reinterpret_cast<const char*>(piece.data()),
                                                  piece.size());
                redo = Call::none;
                if (n == LIBSSH2_ERROR_EAGAIN) {
                    if (s.eagain()) {
                        owner_call = Call::write;
                        return progressed ? Step::progress : Step::idle;
                    }
                    break;
                }
                if (n < 0) {
                    // The command may exit without reading stdin: not an error of ours.
                    if (!channel_level(static_cast<int>(n))) {
                        finish(s.error(static_cast<int>(n), "writing command input"));
                        return Step::done;
                    }
                    drop_stdin();
                    break;
                }
                consume_stdin(static_cast<std::size_t>(n));
                progressed = true;
            }
            if (stdin_exhausted()) stdin_done = true;
        }
        if (stdin_done && !eof_sent && (redo == Call::none || redo == Call::eof)) {
            int rc = libssh2_channel_send_eof(ch);
            redo = Call::none;
            if (rc == LIBSSH2_ERROR_EAGAIN) {
                if (s.eagain()) {
                    owner_call = Call::eof;
                    return progressed ? Step::progress : Step::idle;
                }
            } else {
                eof_sent = true;  // errors here mean the channel is closing anyway
                progressed = true;
            }
        }
        char buf[65536];
        for (int stream = 0; stream < 2; ++stream) {
            if (eof[stream]) continue;
            if (redo == Call::read && stream != owner_stream) continue;
            {
                std::lock_guard lk(mu);
                if (queued >= kQueueLimit && redo != Call::read) continue;
            }
            for (int i = 0; i < 64; ++i) {
                ssize_t n = libssh2_channel_read_ex(ch, stream, buf, sizeof buf);
                redo = Call::none;
                if (n == LIBSSH2_ERROR_EAGAIN) {
                    if (s.eagain()) {
                        // A half-sent window adjust: this very call goes first next time.
                        owner_call = Call::read;
                        owner_stream = stream;
                        return progressed ? Step::progress : Step::idle;
                    }
                    break;
                }
                if (n < 0) {
                    auto f = s.error(static_cast<int>(n), "reading command output");
                    if (f.kind == Failure::lost) {
                        finish(f);
                        return Step::done;
                    }
                    eof[0] = eof[1] = true;
                    break;
                }
                progressed = true;
                if (n == 0) {
                    eof[stream] = true;
                    break;
                }
                std::lock_guard lk(mu);
                chunks.emplace_back(stream, std::string(buf, static_cast<std::size_t>(n)));
                queued += static_cast<std::size_t>(n);
                cv.notify_all();
                if (queued >= kQueueLimit) break;
            }
        }
        if (eof[0] && eof[1]) {
            state = closing;
            return Step::progress;
        }
        return progressed ? Step::progress : Step::idle;
    }

    Step step(Session::Impl& s) override {
        if (state < closing && s.send_owner != this && cancelled()) {
            if (state == opening) {
                if (s.opener != this) {
                    finish({Failure::timeout, "cancelled"});
                    return Step::done;
                }
            } else {
                state = freeing;
            }
        }
        switch (state) {
            case opening: {
                if (s.opener && s.opener != this) return Step::idle;
                s.opener = this;
                ch = libssh2_channel_open_ex(s.s, "session", 7, 2u << 20,
                                             LIBSSH2_CHANNEL_PACKET_DEFAULT, nullptr, 0);
                if (!ch) {
                    int rc = libssh2_session_last_errno(s.s);
                    if (s.would_block(rc)) return Step::idle;
                    s.opener = nullptr;
                    finish(s.error(rc, "cannot open a session channel"));
                    return Step::done;
                }
                // The exec request is part of the open: libssh2 1.10 mixes up a channel request
                // that waits for its reply with another channel's open or SFTP start-up (seen as
                // "Unable to request SFTP subsystem"), so the opener slot is kept until the
                // request is answered (released when the op ends, whatever happens).
                state = starting;
                return Step::progress;
            }
            case starting: {
                int rc = libssh2_channel_process_startup(ch, "exec", 4, command.data(),
                                                         static_cast<unsigned>(command.size()));
                if (s.would_block(rc)) return Step::idle;
                if (s.opener == this) s.opener = nullptr;
                if (rc != 0) {
                    auto f = s.error(rc, "exec request refused");
                    if (f.kind == Failure::lost) {
                        finish(f);
                        return Step::done;
                    }
                    failure = f;  // reported after the channel is freed
                    state = freeing;
                    return Step::progress;
                }
                state = streaming;
                return Step::progress;
            }
            case streaming:
                return stream(s);
            case closing: {
                int rc = libssh2_channel_close(ch);
                if (s.would_block(rc)) return Step::idle;
                if (rc == 0) {
                    rc = libssh2_channel_wait_closed(ch);
                    if (s.would_block(rc)) return Step::idle;
                }
                exit_status = libssh2_channel_get_exit_status(ch);
                char* sig = nullptr;
                std::size_t sig_len = 0;
                libssh2_channel_get_exit_signal(ch, &sig, &sig_len, nullptr, nullptr, nullptr,
                                                nullptr);
                if (sig) {
                    exit_signal.assign(sig, sig_len);
                    libssh2_free(s.s, sig);
                    exit_status = -1;
                }
                state = freeing;
                return Step::progress;
            }
            case freeing: {
                int rc = libssh2_channel_free(ch);
                if (s.would_block(rc)) return Step::idle;
                ch = nullptr;
                Failure f = failure;
                if (f.kind == Failure::none && cancelled()) f = {Failure::timeout, "cancelled"};
                finish(f);
                return Step::done;
            }
        }
        return Step::idle;
    }
};

constexpr const char* kPidMarker = "\036sky-pid ";
constexpr const char* kPidMarkerCommand = "printf '\\036sky-pid %d\\n' $$ >&2; ";

// Splits chunks into lines for a callback, or captures them (tail kept under the cap).
struct LineSink {
    const LineCallback* cb;
    std::string* capture;
    std::size_t limit;
    std::string partial;
    void feed(std::string_view data) {
        if (!*cb) {
            capture->append(data);
            if (capture->size() > limit) capture->erase(0, capture->size() - limit);
            return;
        }
        std::size_t start = 0;
        for (;;) {
            auto nl = data.find('\n', start);
            if (nl == std::string_view::npos) break;
            if (partial.empty()) {
                (*cb)(data.substr(start, nl - start));
            } else {
                partial.append(data.substr(start, nl - start));
                (*cb)(partial);
                partial.clear();
            }
            start = nl + 1;
        }
        partial.append(data.substr(start));
        if (partial.size() > limit) {  // a runaway line: deliver it in pieces
            (*cb)(partial);
            partial.clear();
        }
    }
    void flush() {
        if (*cb && !partial.empty()) (*cb)(partial);
        partial.clear();
    }
};

// ------------------------------------------------------------------------------------------------
// Upload (SFTP)

struct UploadOp final : Op {
    std::string remote_path;
    int mode = 0644;
    // Shared with the caller.
    std::mutex mu;
    std::condition_variable cv;
    InputQueue in;
    bool finished = false;
    Failure failure;

    // Pump only.
    enum { init, opening, writing, setting_mode, closing } state = init;
    LIBSSH2_SFTP_HANDLE* h = nullptr;
    std::size_t acked = 0;  // of the front chunk
    Failure pending_failure;

    void finish(Failure f) {
        std::lock_guard lk(mu);
        finished = true;
        failure = std::move(f);
        cv.notify_all();
    }
    void abort(const Failure& f) override {
        h = nullptr;
        finish(f);
    }
    Failure sftp_failure(Session::Impl& s, int rc, const std::string& what) {
        if (rc == LIBSSH2_ERROR_SFTP_PROTOCOL) {
            return {Failure::channel, "ssh " + s.label + ": " + what + " " + remote_path + ": " +
                                          sftp_error_name(libssh2_sftp_last_error(s.sftp))};
        }
        return s.error(rc, what + " " + remote_path);
    }
    Step fail_or_close(Session::Impl& s, Failure f) {
        if (f.kind == Failure::lost || !h) {
            if (s.sftp_user == this) s.sftp_user = nullptr;
            finish(f);
            return Step::done;
        }
        pending_failure = std::move(f);
        state = closing;
        return Step::progress;
    }

    Step step(Session::Impl& s) override {
        switch (state) {
            case init: {
                if (s.sftp_user && s.sftp_user != this) return Step::idle;
                s.sftp_user = this;
                if (!s.sftp) {
                    if (s.opener && s.opener != this) return Step::idle;
                    s.opener = this;
                    s.sftp = libssh2_sftp_init(s.s);
                    if (!s.sftp) {
                        int rc = libssh2_session_last_errno(s.s);
                        if (s.would_block(rc)) return Step::idle;
                        s.opener = nullptr;
                        s.sftp_user = nullptr;
                        finish(s.error(rc, "cannot start SFTP"));
                        return Step::done;
                    }
                    s.opener = nullptr;
                }
                state = opening;
                return Step::progress;
            }
            case opening: {
                h = libssh2_sftp_open_ex(s.sftp, remote_path.data(),
                                         static_cast<unsigned>(remote_path.size()),
                                         LIBSSH2_FXF_WRITE | LIBSSH2_FXF_CREAT | LIBSSH2_FXF_TRUNC,
                                         mode & 0777, LIBSSH2_SFTP_OPENFILE);
                if (!h) {
                    int rc = libssh2_session_last_errno(s.s);
                    if (s.would_block(rc)) return Step::idle;
                    return fail_or_close(s, sftp_failure(s, rc, "cannot create"));
                }
                state = writing;
                return Step::progress;
            }
            case writing: {
                bool progressed = false;
                for (int i = 0; i < 256; ++i) {
                    const std::byte* data;
                    std::size_t size;
                    {
                        std::lock_guard lk(mu);
                        if (in.chunks.empty()) {
                            if (in.done) {
                                state = setting_mode;
                                return Step::progress;
                            }
                            return progressed ? Step::progress : Step::idle;
                        }
                        data = in.chunks.front().data;
                        size = in.chunks.front().size;
                    }
                    ssize_t n = libssh2_sftp_write(h, reinterpret_cast<const char*>(data) + acked,
                                                   size - acked);
                    if (s.would_block(n)) return progressed ? Step::progress : Step::idle;
                    if (n < 0) {
                        return fail_or_close(s,
                                             sftp_failure(s, static_cast<int>(n), "cannot write"));
                    }
                    progressed = true;
                    acked += static_cast<std::size_t>(n);
                    if (acked == size) {
                        acked = 0;
                        std::lock_guard lk(mu);
                        in.queued -= size;
                        in.chunks.pop_front();
                        cv.notify_all();
                    }
                }
                return Step::progress;
            }
            case setting_mode: {
                LIBSSH2_SFTP_ATTRIBUTES attrs{};
                attrs.flags = LIBSSH2_SFTP_ATTR_PERMISSIONS;
                attrs.permissions = static_cast<unsigned long>(mode & 07777);
                int rc = libssh2_sftp_fsetstat(h, &attrs);
                if (s.would_block(rc)) return Step::idle;
                if (rc != 0) return fail_or_close(s, sftp_failure(s, rc, "cannot chmod"));
                state = closing;
                return Step::progress;
            }
            case closing: {
                int rc = libssh2_sftp_close_handle(h);
                if (s.would_block(rc)) return Step::idle;
                h = nullptr;
                s.sftp_user = nullptr;
                Failure f = pending_failure;
                if (rc != 0 && f.kind == Failure::none) f = sftp_failure(s, rc, "cannot close");
                finish(f);
                return Step::done;
            }
        }
        return Step::idle;
    }
};

// Asks for the sftp subsystem on a channel of its own and closes it: the answer decides how
// uploads go. libssh2's own sftp_init cannot be used to ask: on a refusal it frees its channel
// in a loop that never yields in non-blocking mode (a core at 100%, forever).
struct SftpProbeOp final : Op {
    std::mutex mu;
    std::condition_variable cv;
    bool finished = false;
    bool available = false;
    Failure failure;

    enum { opening, requesting, closing, freeing } state = opening;
    LIBSSH2_CHANNEL* ch = nullptr;

    void finish(Failure f = {}) {
        std::lock_guard lk(mu);
        finished = true;
        failure = std::move(f);
        cv.notify_all();
    }
    void abort(const Failure& f) override {
        ch = nullptr;
        finish(f);
    }
    Step step(Session::Impl& s) override {
        switch (state) {
            case opening: {
                if (s.opener && s.opener != this) return Step::idle;
                s.opener = this;
                ch = libssh2_channel_open_ex(s.s, "session", 7, 256u << 10,
                                             LIBSSH2_CHANNEL_PACKET_DEFAULT, nullptr, 0);
                if (!ch) {
                    int rc = libssh2_session_last_errno(s.s);
                    if (s.would_block(rc)) return Step::idle;
                    s.opener = nullptr;
                    finish(s.error(rc, "cannot open a session channel"));
                    return Step::done;
                }
                state = requesting;  // the opener slot is kept until the request is answered
                return Step::progress;
            }
            case requesting: {
                int rc = libssh2_channel_process_startup(ch, "subsystem", 9, "sftp", 4);
                if (s.would_block(rc)) return Step::idle;
                if (s.opener == this) s.opener = nullptr;
                if (rc != 0) {
                    Failure f = s.error(rc, "sftp subsystem request");
                    if (f.kind == Failure::lost) {
                        finish(f);
                        return Step::done;
                    }
                }
                available = rc == 0;
                state = closing;
                return Step::progress;
            }
            case closing: {
                int rc = libssh2_channel_close(ch);
                if (s.would_block(rc)) return Step::idle;
                state = freeing;
                return Step::progress;
            }
            case freeing: {
                int rc = libssh2_channel_free(ch);
                if (s.would_block(rc)) return Step::idle;
                ch = nullptr;
                finish();
                return Step::done;
            }
        }
        return Step::idle;
    }
};

// ------------------------------------------------------------------------------------------------
// Tunnel (direct-tcpip channel as a Transport)

struct TunnelOp final : Op {
    std::string target_host;
    std::uint16_t target_port = 0;
    std::string socket_path;  // non-empty: a Unix socket on the server (direct-streamlocal)

    std::string target() const {
        return socket_path.empty() ? target_host + ":" + std::to_string(target_port)
                                   : "unix:" + socket_path;
    }
    std::uint32_t window = 0;
    static constexpr std::size_t kRing = 4u << 20;
    static constexpr std::size_t kMaxRead = 256u << 10;

    // Shared with the caller.
    std::mutex mu;
    std::condition_variable cv;  // reader, writer and opener wait here
    Ring in{kRing};
    Ring out{kRing};
    bool opened = false;
    bool in_eof = false;    // the remote ended its side
    bool shut = false;      // the caller shut the transport down
    bool finished = false;  // the channel is gone
    bool reader_waiting_for_space = false;
    Failure failure;

    // Pump only.
    enum { opening, running, freeing } state = opening;
    LIBSSH2_CHANNEL* ch = nullptr;
    const std::byte* pending_ptr = nullptr;  // a write that returned EAGAIN: repeat it as is
    std::size_t pending_len = 0;
    bool remote_closed = false;

    void finish(Failure f) {
        std::lock_guard lk(mu);
        finished = true;
        if (f.kind != Failure::none && failure.kind == Failure::none) failure = std::move(f);
        cv.notify_all();
    }
    void abort(const Failure& f) override {
        ch = nullptr;
        finish(f);
    }

    std::string open_message() const {
        // direct-tcpip: host to connect, port, originator address, originator port.
        auto put32 = [](std::string& m, std::uint32_t v) {
            m.push_back(static_cast<char>(v >> 24));
            m.push_back(static_cast<char>(v >> 16));
            m.push_back(static_cast<char>(v >> 8));
            m.push_back(static_cast<char>(v));
        };
        std::string m;
        if (!socket_path.empty()) {
            // direct-streamlocal@openssh.com: socket path, reserved string, reserved uint32.
            put32(m, static_cast<std::uint32_t>(socket_path.size()));
            m += socket_path;
            put32(m, 0);
            put32(m, 0);
            return m;
        }
        put32(m, static_cast<std::uint32_t>(target_host.size()));
        m += target_host;
        put32(m, target_port);
        std::string origin = "127.0.0.1";
        put32(m, static_cast<std::uint32_t>(origin.size()));
        m += origin;
        put32(m, 22);
        return m;
    }

    Step step(Session::Impl& s) override {
        switch (state) {
            case opening: {
                if (s.opener && s.opener != this) return Step::idle;
                s.opener = this;
                std::string msg = open_message();
                const std::string type =
                    socket_path.empty() ? "direct-tcpip" : "direct-streamlocal@openssh.com";
                ch = libssh2_channel_open_ex(s.s, type.data(), static_cast<unsigned>(type.size()),
                                             window, LIBSSH2_CHANNEL_PACKET_DEFAULT, msg.data(),
                                             static_cast<unsigned>(msg.size()));
                if (!ch) {
                    int rc = libssh2_session_last_errno(s.s);
                    if (s.would_block(rc)) return Step::idle;
                    s.opener = nullptr;
                    auto f = s.error(rc, "cannot open a tunnel to " + target());
                    finish(f);
                    return Step::done;
                }
                s.opener = nullptr;
                state = running;
                std::lock_guard lk(mu);
                opened = true;
                cv.notify_all();
                return Step::progress;
            }
            case running:
                return run(s);
            case freeing: {
                int rc = libssh2_channel_free(ch);
                if (s.would_block(rc)) return Step::idle;
                ch = nullptr;
                finish({});
                return Step::done;
            }
        }
        return Step::idle;
    }

    enum class Call { none, write, read } owner_call = Call::none;

    // One libssh2 write of the pending (or next) outbound span. Returns false on EAGAIN.
    bool write_once(Session::Impl& s, bool* progressed, Step* result) {
        ssize_t n =
            libssh2_channel_write(ch, reinterpret_cast<const char*>(pending_ptr), pending_len);
        if (n == LIBSSH2_ERROR_EAGAIN) {
            if (s.eagain()) owner_call = Call::write;
            return false;
        }
        pending_ptr = nullptr;
        if (n < 0) {
            auto f = s.error(static_cast<int>(n), "tunnel write");
            if (f.kind == Failure::lost) {
                finish(f);
                *result = Step::done;
                return false;
            }
            remote_closed = true;
            std::lock_guard lk(mu);
            if (failure.kind == Failure::none) failure = f;
            cv.notify_all();
            return false;
        }
        *progressed = true;
        std::lock_guard lk(mu);
        out.consume(static_cast<std::size_t>(n));
        cv.notify_all();
        return true;
    }

    // One libssh2 read into the inbound ring (a zero-length read when the ring is full only
    // finishes a half-sent window adjust). Returns false when reading should stop for now.
    bool read_once(Session::Impl& s, bool* progressed, Step* result) {
        std::span<std::byte> space;
        {
            std::lock_guard lk(mu);
            if (in_eof) return false;
            space = in.free_span();
        }
        char dummy;
        char* dst = space.empty() ? &dummy : reinterpret_cast<char*>(space.data());
        std::size_t len = std::min(space.size(), kMaxRead);
        if (len == 0 && owner_call != Call::read) return false;
        ssize_t n = libssh2_channel_read(ch, dst, len);
        if (n == LIBSSH2_ERROR_EAGAIN) {
            if (s.eagain()) owner_call = Call::read;
            return false;
        }
        if (n < 0) {
            auto f = s.error(static_cast<int>(n), "tunnel read");
            if (f.kind == Failure::lost) {
                finish(f);
                *result = Step::done;
                return false;
            }
            std::lock_guard lk(mu);
            in_eof = true;
            if (failure.kind == Failure::none) failure = f;
            cv.notify_all();
            return false;
        }
        if (len == 0) return false;  // the adjust went out; nothing was taken
        *progressed = true;
        std::lock_guard lk(mu);
        if (n == 0) {
            in_eof = true;
        } else {
            in.commit(static_cast<std::size_t>(n));
        }
        cv.notify_all();
        return n > 0;
    }

    Step run(Session::Impl& s) {
        bool progressed = false;
        Step result = Step::idle;
        if (s.send_owner == this) {
            // Only the call that left a packet half sent may run, with the same arguments.
            Call c = owner_call;
            owner_call = Call::none;
            if (c == Call::write && pending_ptr) {
                write_once(s, &progressed, &result);
            } else if (c == Call::read) {
                owner_call = Call::read;  // lets a full ring still make the zero-length read
                if (!read_once(s, &progressed, &result) && owner_call == Call::read &&
                    !(libssh2_session_block_directions(s.s) & LIBSSH2_SESSION_BLOCK_OUTBOUND)) {
                    owner_call = Call::none;
                }
            }
            if (result == Step::done) return result;
            if (owner_call != Call::none) return progressed ? Step::progress : Step::idle;
        }
        bool want_shut;
        {
            std::lock_guard lk(mu);
            want_shut = shut;
        }
        for (int i = 0; i < 64 && !remote_closed; ++i) {
            if (!pending_ptr) {
                std::lock_guard lk(mu);
                auto f = out.filled_span();
                if (f.empty() || want_shut || in_eof) break;
                pending_ptr = f.data();
                pending_len = std::min<std::size_t>(f.size(), 1u << 20);
            }
            if (!write_once(s, &progressed, &result)) break;
        }
        if (result == Step::done) return result;
        if (owner_call != Call::none) return progressed ? Step::progress : Step::idle;
        if (want_shut && !pending_ptr) {
            state = freeing;
            return Step::progress;
        }
        // Read while the inbound ring has room; a full ring stops reading, the channel window
        // closes and the sender waits: flow control end to end.
        for (int i = 0; i < 64; ++i) {
            if (!read_once(s, &progressed, &result)) break;
        }
        if (result == Step::done) return result;
        return progressed ? Step::progress : Step::idle;
    }
};

class TunnelTransport final : public sky::detail::Transport {
public:
    TunnelTransport(std::shared_ptr<Session::Impl> session, std::shared_ptr<TunnelOp> op)
        : session_(std::move(session)), op_(std::move(op)) {
        desc_ = "ssh channel to " + op_->target() + " via " + session_->label;
    }
    ~TunnelTransport() override { shutdown(); }

    std::size_t read_some(std::span<std::byte> buf) override {
        if (buf.empty()) return 0;
        std::unique_lock lk(op_->mu);
        op_->cv.wait(
            lk, [&] { return op_->in.size() > 0 || op_->in_eof || op_->finished || op_->shut; });
        if (op_->in.size() > 0) {
            bool pump_paused = op_->in.space() == 0;
            std::size_t total = 0;
            while (total < buf.size() && op_->in.size() > 0) {
                auto f = op_->in.filled_span();
                std::size_t n = std::min(f.size(), buf.size() - total);
                std::memcpy(buf.data() + total, f.data(), n);
                op_->in.consume(n);
                total += n;
            }
            lk.unlock();
            // The pump stops reading while the ring is full; tell it there is room again.
            if (pump_paused) session_->wake();
            return total;
        }
        if (op_->shut) return 0;
        if (op_->failure.kind != Failure::none && op_->failure.kind != Failure::channel) {
            Failure f = op_->failure;
            lk.unlock();
            f.raise();
        }
        return 0;  // orderly end of stream (a channel-level error also ends the stream)
    }

    // The hello and authentication timeouts rest on this: a worker that never speaks must not
    // hold a pool's start (the default says "readable" at once, and the read then blocks).
    bool wait_readable(std::chrono::milliseconds timeout) override {
        std::unique_lock lk(op_->mu);
        return op_->cv.wait_for(lk, timeout, [&] {
            return op_->in.size() > 0 || op_->in_eof || op_->finished || op_->shut;
        });
    }

    void write_all(std::span<const std::span<const std::byte>> bufs) override {
        for (auto b : bufs) {
            std::size_t off = 0;
            while (off < b.size()) {
                std::unique_lock lk(op_->mu);
                op_->cv.wait(lk, [&] {
                    return op_->out.space() > 0 || op_->finished || op_->shut || op_->in_eof ||
                           op_->failure.kind != Failure::none;
                });
                if (op_->shut) throw ChannelError(desc_ + ": write after shutdown");
                // The far end closed (the worker exited). The runtime never half-closes, so
                // this ends the stream both ways, and writing on would only feed a closing
                // channel.
                if (op_->in_eof && op_->failure.kind != Failure::lost) {
                    throw ChannelError(desc_ + ": closed by the remote end");
                }
                if (op_->failure.kind != Failure::none || op_->finished) {
                    Failure f = op_->failure;
                    if (f.kind == Failure::none) {
                        f = {Failure::channel, desc_ + ": channel closed"};
                    }
                    lk.unlock();
                    f.raise();
                }
                std::size_t n = 0;
                while (off < b.size() && op_->out.space() > 0) {
                    auto sp = op_->out.free_span();
                    std::size_t k = std::min(sp.size(), b.size() - off);
                    std::memcpy(sp.data(), b.data() + off, k);
                    op_->out.commit(k);
                    off += k;
                    n += k;
                }
                lk.unlock();
                session_->wake();
            }
        }
    }

    void shutdown() noexcept override {
        {
            std::lock_guard lk(op_->mu);
            if (op_->shut) return;
            op_->shut = true;
            op_->cv.notify_all();
        }
        session_->wake();
    }

    [[nodiscard]] std::string describe() const override { return desc_; }

private:
    std::shared_ptr<Session::Impl> session_;
    std::shared_ptr<TunnelOp> op_;
    std::string desc_;
};

// ------------------------------------------------------------------------------------------------
// Connecting

struct ConnectFailure {
    enum Kind { network, timeout, auth, host_key } kind;
    std::string message;
};

int tcp_connect(const std::string& host, std::uint16_t port, Clock::time_point deadline,
                std::string* err, bool* timed_out) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* res = nullptr;
    std::string service = std::to_string(port);
    int gai = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res);
    if (gai != 0) {
        *err = std::string("cannot resolve: ") + ::gai_strerror(gai);
        return -1;
    }
    int fd = -1;
    *err = "no address";
    for (addrinfo* ai = res; ai; ai = ai->ai_next) {
        fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                      ai->ai_protocol);
        if (fd < 0) continue;
        int rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
        if (rc != 0 && errno == EINPROGRESS) {
            pollfd p{fd, POLLOUT, 0};
            int left = static_cast<int>(ms_left(deadline));
            int pr = left > 0 ? ::poll(&p, 1, left) : 0;
            if (pr == 0) {
                *err = "connect timed out";
                *timed_out = true;
                ::close(fd);
                fd = -1;
                break;
            }
            int soerr = 0;
            socklen_t len = sizeof soerr;
            ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len);
            rc = soerr == 0 ? 0 : -1;
            errno = soerr;
        }
        if (rc == 0) break;
        *err = std::string("connect: ") + std::strerror(errno);
        ::close(fd);
        fd = -1;
    }
    ::freeaddrinfo(res);
    return fd;
}

constexpr const char* kDefaultCiphers = "aes128-ctr,aes256-ctr,aes192-ctr";
constexpr const char* kDefaultMacs = "hmac-sha2-256,hmac-sha1,hmac-sha2-512";

// The methods of a comma-separated preference that the linked libssh2 supports, in the
// preference's order, without repeats. libssh2 1.10 strips a method it does not know from a
// preference string with memcpy() over overlapping ranges (kex.c; memmove() since 1.11), and the
// host-key preference names methods newer than 1.10 (rsa-sha2-*): so pass it only what it knows.
// When libssh2 cannot list its methods, the preference goes through unchanged.
std::string supported_methods(LIBSSH2_SESSION* s, int method, std::string_view pref) {
    const char** algs = nullptr;
    int n = libssh2_session_supported_algs(s, method, &algs);
    if (n < 0 || !algs) return std::string(pref);
    std::vector<std::string> have(algs, algs + n);
    libssh2_free(s, static_cast<void*>(algs));
    std::string out;
    std::vector<std::string_view> taken;
    while (!pref.empty()) {
        auto comma = pref.find(',');
        std::string_view name = pref.substr(0, comma);
        pref = comma == std::string_view::npos ? std::string_view{} : pref.substr(comma + 1);
        if (name.empty() || std::find(taken.begin(), taken.end(), name) != taken.end()) continue;
        if (std::find(have.begin(), have.end(), name) == have.end()) continue;
        taken.push_back(name);
        if (!out.empty()) out += ',';
        out += name;
    }
    return out;
}

std::string joined(LIBSSH2_SESSION* s, int method) {
    const char** algs = nullptr;
    int n = libssh2_session_supported_algs(s, method, &algs);
    if (n < 0 || !algs) return "(libssh2 cannot list them)";
    std::string out;
    for (int i = 0; i < n; ++i) out += (i ? "," : "") + std::string(algs[i]);
    libssh2_free(s, static_cast<void*>(algs));
    return out;
}

void tune_socket(int fd, std::chrono::seconds keepalive) {
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (keepalive.count() > 0) {
        int idle = static_cast<int>(keepalive.count());
        int cnt = 3;
        ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
        ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
        ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &idle, sizeof idle);
        ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
        // Unacknowledged data to a vanished peer fails the socket instead of waiting ~15 min.
        unsigned user_timeout = static_cast<unsigned>(idle) * 3u * 1000u;
        ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof user_timeout);
    }
}

}  // namespace

// ------------------------------------------------------------------------------------------------

void Session::Impl::run() {
    std::vector<std::shared_ptr<Op>> ops;
    auto next_keepalive = Clock::now() + opts.keepalive_interval;
    bool hangup = false;
    for (;;) {
        std::uint64_t v;
        [[maybe_unused]] auto r = ::read(wake_fd, &v, sizeof v);
        wake_pending = false;
        {
            std::lock_guard lk(mu);
            if (closing) break;
            for (auto& op : incoming) ops.push_back(std::move(op));
            incoming.clear();
        }
        round_dirs = 0;
        round_eagain = false;
        bool any_progress = false;
        for (int round = 0; round < 64 && !dead; ++round) {
            bool progress = false;
            round_dirs = 0;
            round_eagain = false;
            if (keepalive_owner) {
                int next = 0;
                int rc = libssh2_keepalive_send(s, &next);
                if (rc == LIBSSH2_ERROR_EAGAIN) {
                    eagain();
                    break;
                }
                keepalive_owner = false;
                if (rc != 0) {
                    error(rc, "keepalive");
                    break;
                }
            }
            for (std::size_t i = 0; i < ops.size() && !dead;) {
                Op* op = ops[i].get();
                if (send_owner && send_owner != op) {
                    ++i;
                    continue;
                }
                Step st = op->step(*this);
                flush();
                bool blocked_out =
                    (libssh2_session_block_directions(s) & LIBSSH2_SESSION_BLOCK_OUTBOUND) != 0;
                if (st == Step::done) {
                    if (send_owner == op) send_owner = nullptr;
                    if (opener == op) opener = nullptr;
                    if (sftp_user == op) sftp_user = nullptr;
                    ops.erase(ops.begin() + static_cast<std::ptrdiff_t>(i));
                    progress = true;
                    continue;
                }
                if (st == Step::progress) progress = true;
                if (blocked_out) {
                    send_owner = op;
                } else if (send_owner == op && !blocked_out) {
                    send_owner = nullptr;
                }
                ++i;
            }
            any_progress |= progress;
            if (!progress) break;
        }
        if (dead) break;
        auto now = Clock::now();
        if (opts.keepalive_interval.count() > 0 && now >= next_keepalive && !send_owner &&
            !keepalive_owner) {
            int next = 0;
            int rc = libssh2_keepalive_send(s, &next);
            if (rc == LIBSSH2_ERROR_EAGAIN) {
                keepalive_owner = true;
                eagain();
            } else if (rc != 0) {
                error(rc, "keepalive");
                break;
            }
            next_keepalive = now + opts.keepalive_interval;
        }
        if (hangup && !any_progress) {
            // The peer closed the connection and nothing can be read from it any more.
            if (!dead) {
                death = {Failure::lost, "ssh " + label + ": connection closed by the server"};
                dead = true;
            }
            break;
        }
        flush();
        if (sock_error != 0) {
            death = {Failure::lost, "ssh " + label + ": connection lost (send: " +
                                        std::strerror(sock_error) + ")"};
            dead = true;
            break;
        }
        pollfd p[2] = {{wake_fd, POLLIN, 0}, {sock, 0, 0}};
        if (round_dirs & LIBSSH2_SESSION_BLOCK_INBOUND) p[1].events |= POLLIN;
        if (round_dirs & LIBSSH2_SESSION_BLOCK_OUTBOUND) p[1].events |= POLLOUT;
        if (pending_out() > 0) p[1].events |= POLLOUT;
        if (round_eagain && p[1].events == 0) p[1].events |= POLLIN;
        if (!(p[1].events & POLLIN)) p[1].events |= POLLRDHUP;
        int timeout = 1000;
        if (opts.keepalive_interval.count() > 0) {
            timeout = static_cast<int>(std::clamp<long>(ms_left(next_keepalive), 0, 1000));
        }
        if (any_progress && !round_eagain) timeout = 0;  // more work may be ready
        int pr = ::poll(p, 2, timeout);
        // A hangup only ends the session once a round without progress shows nothing is left
        // to read (ops that read see the error themselves first).
        hangup = pr > 0 && (p[1].revents & (POLLHUP | POLLERR | POLLRDHUP)) != 0;
    }
    teardown(ops);
}

void Session::Impl::teardown(std::vector<std::shared_ptr<Op>>& ops) {
    {
        std::lock_guard lk(mu);
        for (auto& op : incoming) ops.push_back(std::move(op));
        incoming.clear();
        closing = true;
    }
    Failure f = dead ? death : Failure{Failure::lost, "ssh " + label + ": session closed"};
    dead = true;
    // Best effort, bounded: say goodbye, then make every later send fail at once so freeing
    // channels cannot wait on a peer.
    libssh2_session_set_blocking(s, 1);
    libssh2_session_set_timeout(s, 1000);
    if (death.kind == Failure::none && !send_owner) {
        libssh2_session_disconnect(s, "sky: session closed");
    }
    // Push out what is buffered (the goodbye), bounded, then end the socket for good.
    auto deadline = Clock::now() + milliseconds(500);
    for (int i = 0; i < 50 && pending_out() > 0 && sock_error == 0; ++i) {
        flush();
        if (pending_out() == 0 || Clock::now() > deadline) break;
        pollfd p{sock, POLLOUT, 0};
        ::poll(&p, 1, 10);
    }
    ::shutdown(sock, SHUT_RDWR);
    if (sock_error == 0) sock_error = EPIPE;  // later sends fail at once
    if (sftp) {
        libssh2_sftp_shutdown(sftp);
        sftp = nullptr;
    }
    for (auto& op : ops) op->abort(f);
    ops.clear();
}

Session::Session(SessionOptions options) : impl_(std::make_shared<Impl>()) {
    global_init();
    Impl& im = *impl_;
    im.opts = std::move(options);
    const auto& o = im.opts;
    im.label = o.user + "@" + o.host + ":" + std::to_string(o.port);
    if (o.private_key_file.empty() && o.private_key.empty()) {
        throw AuthenticationError("ssh " + im.label + ": no private key given");
    }
    std::vector<ParsedKey> known;
    if (!o.host_key.known_hosts_file.empty()) {
        known = known_hosts_entries(o.host_key.known_hosts_file, o.host, o.port);
    }
    if (!o.host_key.accept_any && o.host_key.fingerprints.empty() &&
        o.host_key.known_hosts_file.empty()) {
        throw SshError("ssh " + im.label +
                       ": no host key pinned (give a fingerprint, a public key or a known_hosts "
                       "file; trust on first use needs HostKeyPin::insecure_accept_any())");
    }
    std::vector<std::string> expected = o.host_key.fingerprints;
    for (const auto& k : known) expected.push_back(k.fingerprint);
    std::string pubkey_file;
    if (!o.private_key_file.empty()) {
        auto pub = o.private_key_file.string() + ".pub";
        if (::access(pub.c_str(), R_OK) == 0) pubkey_file = pub;
        if (::access(o.private_key_file.c_str(), R_OK) != 0) {
            throw AuthenticationError("ssh " + im.label + ": cannot read private key file " +
                                      o.private_key_file.string());
        }
    }
    // Host key algorithms: the pinned types first, so the server shows the key we know.
    std::string hostkey_pref;
    for (const auto& k : known) {
        if (hostkey_pref.find(k.type) == std::string::npos) hostkey_pref += k.type + ",";
    }
    hostkey_pref +=
        "ssh-ed25519,ecdsa-sha2-nistp256,ecdsa-sha2-nistp384,ecdsa-sha2-nistp521,rsa-sha2-512,"
        "rsa-sha2-256,ssh-rsa";

    int attempts = std::max(1, o.connect_attempts);
    auto delay = o.retry_delay;
    std::optional<ConnectFailure> last;
    for (int attempt = 1; attempt <= attempts; ++attempt) {
        if (attempt > 1) {
            std::this_thread::sleep_for(delay);
            delay = std::min<milliseconds>(delay * 2, milliseconds(5000));
        }
        auto deadline = Clock::now() + o.connect_timeout;
        std::string err;
        bool timed_out = false;
        int fd = tcp_connect(o.host, o.port, deadline, &err, &timed_out);
        if (fd < 0) {
            last =
                ConnectFailure{timed_out ? ConnectFailure::timeout : ConnectFailure::network, err};
            continue;
        }
        tune_socket(fd, o.keepalive_interval);
        LIBSSH2_SESSION* s = libssh2_session_init_ex(nullptr, nullptr, nullptr, &im);
        if (!s) {
            ::close(fd);
            throw SshError("ssh " + im.label + ": cannot allocate a libssh2 session");
        }
        auto fail = [&](ConnectFailure cf) {
            libssh2_session_free(s);
            ::close(fd);
            last = std::move(cf);
        };
        libssh2_session_set_blocking(s, 1);
        libssh2_session_set_timeout(s, std::max<long>(1, ms_left(deadline)));
        // AES-CTR runs on AES-NI; libssh2 1.10 has no AES-GCM, chacha20 or ETM MACs.
        const char* ciphers = o.ciphers.empty() ? kDefaultCiphers : o.ciphers.c_str();
        const char* macs = o.macs.empty() ? kDefaultMacs : o.macs.c_str();
        struct Pref {
            int method;
            const char* what;
            std::string asked;
            std::string methods = {};
        };
        Pref prefs[] = {
            {LIBSSH2_METHOD_HOSTKEY, "host key algorithms", hostkey_pref},
            {LIBSSH2_METHOD_CRYPT_CS, "ciphers", ciphers},
            {LIBSSH2_METHOD_CRYPT_SC, "ciphers", ciphers},
            {LIBSSH2_METHOD_MAC_CS, "MACs", macs},
            {LIBSSH2_METHOD_MAC_SC, "MACs", macs},
        };
        for (auto& p : prefs) {
            p.methods = supported_methods(s, p.method, p.asked);
            if (!p.methods.empty()) continue;
            std::string known_here = joined(s, p.method);
            libssh2_session_free(s);
            ::close(fd);
            throw SshError("ssh " + im.label + ": none of the " + p.what + " '" + p.asked +
                           "' is supported by the linked libssh2 (it supports: " + known_here +
                           ")");
        }
        for (const auto& p : prefs) libssh2_session_method_pref(s, p.method, p.methods.c_str());
        int rc = libssh2_session_handshake(s, fd);
        if (rc != 0) {
            bool to = rc == LIBSSH2_ERROR_TIMEOUT || ms_left(deadline) == 0;
            fail({to ? ConnectFailure::timeout : ConnectFailure::network,
                  "handshake: " + session_error(s)});
            continue;
        }
        std::size_t key_len = 0;
        int key_type = 0;
        const char* key = libssh2_session_hostkey(s, &key_len, &key_type);
        if (!key || key_len == 0) {
            fail({ConnectFailure::network, "server sent no host key"});
            continue;
        }
        std::string actual = fingerprint_of_blob({key, key_len});
        if (!o.host_key.accept_any &&
            std::find(expected.begin(), expected.end(), actual) == expected.end()) {
            libssh2_session_disconnect(s, "host key mismatch");
            libssh2_session_free(s);
            ::close(fd);
            bool revoked = false;
            if (!o.host_key.known_hosts_file.empty()) {
                auto r = known_hosts_revoked(o.host_key.known_hosts_file);
                revoked = std::find(r.begin(), r.end(), actual) != r.end();
            }
            throw HostKeyMismatch(o.host + ":" + std::to_string(o.port), expected, actual, revoked);
        }
        libssh2_session_set_timeout(s, std::max<long>(1, ms_left(deadline)));
        if (!o.private_key.empty()) {
            rc = libssh2_userauth_publickey_frommemory(
                s, o.user.data(), o.user.size(), nullptr, 0, o.private_key.data(),
                o.private_key.size(), o.passphrase.empty() ? nullptr : o.passphrase.c_str());
        } else {
            rc = libssh2_userauth_publickey_fromfile_ex(
                s, o.user.data(), static_cast<unsigned>(o.user.size()),
                pubkey_file.empty() ? nullptr : pubkey_file.c_str(), o.private_key_file.c_str(),
                o.passphrase.empty() ? nullptr : o.passphrase.c_str());
        }
        if (rc != 0) {
            bool to = rc == LIBSSH2_ERROR_TIMEOUT;
            std::string why = session_error(s);
            fail({to ? ConnectFailure::timeout : ConnectFailure::auth,
                  "public key authentication failed: " + why});
            if (to || o.retry_auth_failure) continue;
            break;
        }
        libssh2_keepalive_config(
            s, 1, static_cast<unsigned>(std::max<long>(o.keepalive_interval.count(), 0)));
        libssh2_session_set_blocking(s, 0);
        // Only now: in blocking mode libssh2 would wait for answers to bytes still buffered.
        im.rbuf.reset(new char[Impl::kReadBuf]);
        libssh2_session_callback_set(s, LIBSSH2_CALLBACK_SEND,
                                     reinterpret_cast<void*>(&Impl::send_cb));
        libssh2_session_callback_set(s, LIBSSH2_CALLBACK_RECV,
                                     reinterpret_cast<void*>(&Impl::recv_cb));
        im.s = s;
        im.sock = fd;
        im.fingerprint = actual;
        last.reset();
        break;
    }
    if (last) {
        std::string msg = "ssh " + im.label + ": " + last->message + " (attempt" +
                          (attempts > 1 ? "s: " : ": ") + std::to_string(attempts) + ")";
        if (last->kind == ConnectFailure::auth) throw AuthenticationError(msg);
        throw ConnectError(msg, last->kind == ConnectFailure::timeout);
    }
    im.wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (im.wake_fd < 0) throw SshError("ssh " + im.label + ": eventfd failed");
    im.pump = std::thread([p = impl_.get()] { p->run(); });
}

Session::~Session() { close(); }

Session& Session::operator=(Session&& other) noexcept {
    if (this != &other) {
        close();
        impl_ = std::move(other.impl_);
    }
    return *this;
}

void Session::close() noexcept {
    if (impl_) impl_->close();
}

bool Session::alive() const { return impl_ && !impl_->dead && impl_->s != nullptr; }

const std::string& Session::host_key_fingerprint() const { return impl_->fingerprint; }

std::string Session::describe() const { return "ssh " + impl_->label; }

namespace {
// Waits for a submitted command: its output to the sinks, its exit status, the timeout.
ExecResult collect_exec(Session& self, Session::Impl& impl, const std::shared_ptr<ExecOp>& op,
                        std::string_view command, const ExecOptions& options);
}  // namespace

ExecResult Session::exec(std::string_view command, const ExecOptions& options) {
    auto op = std::make_shared<ExecOp>();
    // sshd makes the command's shell a process-group leader (setsid); its pid, sent first on
    // stderr, lets a timeout kill the whole group. (libssh2 1.10 cannot send "signal" requests,
    // and closing the channel leaves a silent command running.)
    op->command = std::string(kPidMarkerCommand) + std::string(command);
    op->stdin_data = options.stdin_data;
    impl_->submit(op);
    return collect_exec(*this, *impl_, op, command, options);
}

namespace {
ExecResult collect_exec(Session& self, Session::Impl& impl, const std::shared_ptr<ExecOp>& op,
                        std::string_view command, const ExecOptions& options) {
    ExecResult result;
    LineSink out{&options.on_stdout, &result.out, options.capture_limit, {}};
    LineSink err{&options.on_stderr, &result.err, options.capture_limit, {}};
    std::string err_head;  // stderr until the pid line is parsed
    long remote_pid = 0;
    bool pid_seen = false;
    auto feed_err = [&](std::string_view data) {
        if (pid_seen) return err.feed(data);
        err_head.append(data);
        auto nl = err_head.find('\n');
        if (nl == std::string::npos && err_head.size() < 64) return;
        pid_seen = true;
        std::string_view head(err_head);
        std::string_view marker = kPidMarker;
        if (head.substr(0, marker.size()) == marker && nl != std::string::npos) {
            remote_pid = std::strtol(err_head.c_str() + marker.size(), nullptr, 10);
            head.remove_prefix(nl + 1);
        }
        if (!head.empty()) err.feed(head);
        err_head.clear();
    };
    std::optional<Clock::time_point> deadline;
    if (options.timeout.count() > 0) deadline = Clock::now() + options.timeout;
    bool timed_out = false;
    for (;;) {
        std::deque<std::pair<int, std::string>> chunks;
        bool done;
        {
            std::unique_lock lk(op->mu);
            auto ready = [&] { return !op->chunks.empty() || op->finished; };
            if (deadline && !op->cv.wait_until(lk, *deadline, ready)) {
                timed_out = true;
                break;
            }
            if (!deadline) op->cv.wait(lk, ready);
            chunks.swap(op->chunks);
            op->queued = 0;
            done = op->finished && chunks.empty();
        }
        if (!chunks.empty()) impl.wake();  // the pump may have paused on a full queue
        for (auto& [stream, data] : chunks) {
            if (stream == 0) {
                out.feed(data);
            } else {
                feed_err(data);
            }
        }
        if (done) break;
    }
    if (timed_out) {
        if (remote_pid > 1) {
            try {
                ExecOptions kill_opts;
                kill_opts.timeout = std::chrono::seconds(5);
                self.exec("kill -KILL -- -" + std::to_string(remote_pid) + " 2>/dev/null; true",
                          kill_opts);
            } catch (const sky::Error&) {
                // The session may be the reason of the timeout; the pump cleans up anyway.
            }
        }
        {
            std::lock_guard lk(op->mu);
            op->cancel = true;
        }
        impl.wake();
        // Give the channel a moment to close; if it does not, the pump finishes it later.
        std::unique_lock lk(op->mu);
        op->cv.wait_for(lk, std::chrono::seconds(2), [&] { return op->finished; });
        throw sky::TimeoutError("ssh " + impl.label + ": command did not finish within " +
                                std::to_string(options.timeout.count()) +
                                " ms: " + std::string(command.substr(0, 200)));
    }
    if (!pid_seen && !err_head.empty()) err.feed(err_head);
    out.flush();
    err.flush();
    if (op->failure.kind != Failure::none) op->failure.raise();
    result.exit_status = op->exit_status;
    result.exit_signal = op->exit_signal;
    return result;
}
}  // namespace

namespace {
void wait_upload(UploadOp& op) {
    std::unique_lock lk(op.mu);
    op.cv.wait(lk, [&] { return op.finished; });
    if (op.failure.kind != Failure::none) op.failure.raise();
}

/// Whether the server runs an sftp subsystem: asked on the first upload, then known.
bool sftp_available(Session::Impl& impl) {
    using Sftp = Session::Impl::Sftp;
    if (auto k = impl.sftp_support.load(); k != Sftp::unknown) return k == Sftp::available;
    std::lock_guard probing(impl.sftp_probe_m);
    if (auto k = impl.sftp_support.load(); k != Sftp::unknown) return k == Sftp::available;
    auto op = std::make_shared<SftpProbeOp>();
    impl.submit(op);
    constexpr auto kAnswer = std::chrono::seconds(30);
    std::unique_lock lk(op->mu);
    if (!op->cv.wait_for(lk, kAnswer, [&] { return op->finished; }))
        throw sky::TimeoutError("ssh " + impl.label +
                                ": no answer to the sftp subsystem request within 30 s");
    if (op->failure.kind != Failure::none) op->failure.raise();
    impl.sftp_support = op->available ? Sftp::available : Sftp::refused;
    return op->available;
}

/// Hands what `read` produces to the pump, about kInFlight bytes ahead of it (bounded memory,
/// overlapped I/O), until the end or until `stopped` (the pump no longer takes input). Returns
/// the source's exception, if it threw.
std::exception_ptr feed_input(Session::Impl& impl, std::mutex& mu, std::condition_variable& cv,
                              InputQueue& in, const std::function<bool()>& stopped,
                              const Session::UploadSource& read,
                              const std::function<void(std::uint64_t)>& on_progress) {
    constexpr std::size_t kChunk = 1u << 20;
    constexpr std::size_t kInFlight = 8u << 20;
    std::uint64_t sent = 0;
    std::exception_ptr source_error;
    for (;;) {
        InputQueue::Chunk c;
        c.owned.resize(kChunk);
        std::size_t got = 0;
        bool eof = false;
        try {
            // Fill the chunk: a source may hand out less than asked before its end.
            while (got < kChunk) {
                std::size_t n = read(c.owned.data() + got, kChunk - got);
                if (n == 0) {
                    eof = true;
                    break;
                }
                got += n;
            }
        } catch (...) {
            source_error = std::current_exception();
            eof = true;
            got = 0;
        }
        c.owned.resize(got);
        c.data = c.owned.data();
        c.size = got;
        {
            std::unique_lock lk(mu);
            cv.wait(lk, [&] { return in.queued < kInFlight || stopped(); });
            if (stopped()) break;
            if (got > 0) {
                in.queued += got;
                in.chunks.push_back(std::move(c));
            }
            if (eof) in.done = true;
        }
        impl.wake();
        sent += got;
        if (on_progress && got > 0) on_progress(sent);
        if (eof) break;
    }
    return source_error;
}

/// An upload where the server has no sftp (hardened hosts), as configuration-management tools
/// do it: `cat` into a temporary file beside the target, then chmod and rename in a second
/// command only once every byte arrived, so a broken source never replaces the file.
void upload_by_exec(Session& self, Session::Impl& impl, const Session::UploadSource& read,
                    const std::string& remote_path, int mode,
                    const std::function<void(std::uint64_t)>& on_progress) {
    const std::string part = shell_quote(remote_path + ".sky-part." + random_hex(12));
    const std::string target = shell_quote(remote_path);
    auto failed = [&](const std::string& why) {
        std::string msg = "ssh " + impl.label + ": cannot upload " + remote_path +
                          " (through exec: the server has no sftp subsystem): " + why;
        while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
        return ChannelError(msg);
    };
    const std::string command = "umask 077 && cat > " + part;
    auto op = std::make_shared<ExecOp>();
    op->command = std::string(kPidMarkerCommand) + command;
    op->stdin_streamed = true;
    impl.submit(op);
    std::exception_ptr source_error = feed_input(
        impl, op->mu, op->cv, op->in, [&] { return op->finished || op->stdin_dropped; }, read,
        on_progress);
    if (source_error) {
        // Ends the command's input early; the partial file is removed below, never renamed.
        std::lock_guard lk(op->mu);
        op->in.done = true;
    }
    impl.wake();
    ExecOptions quiet;
    quiet.capture_limit = 64u << 10;
    ExecResult r = collect_exec(self, impl, op, command, quiet);
    if (source_error || r.exit_status != 0) {
        try {
            ExecOptions cleanup;
            cleanup.timeout = std::chrono::seconds(30);
            self.exec("rm -f " + part, cleanup);
        } catch (const sky::Error&) {
            // The session may be the reason; a stray part file is named as such.
        }
        if (source_error) std::rethrow_exception(source_error);
        throw failed(r.err.empty() ? "cat exited with " + std::to_string(r.exit_status) : r.err);
    }
    char octal[16];
    std::snprintf(octal, sizeof octal, "%o", static_cast<unsigned>(mode & 07777));
    ExecOptions place;
    place.timeout = std::chrono::seconds(60);
    r = self.exec("chmod " + std::string(octal) + " " + part + " && mv -f " + part + " " + target +
                      " || { s=$?; rm -f " + part + "; exit $s; }",
                  place);
    if (r.exit_status != 0) throw failed(r.err);
}

/// A source over a buffer the caller keeps alive.
Session::UploadSource span_source(std::span<const std::byte> data) {
    return [data, off = std::size_t{0}](std::byte* buf, std::size_t n) mutable {
        std::size_t k = std::min(n, data.size() - off);
        std::memcpy(buf, data.data() + off, k);
        off += k;
        return k;
    };
}
}  // namespace

void Session::upload(std::span<const std::byte> data, const std::string& remote_path, int mode) {
    if (!sftp_available(*impl_)) {
        upload_by_exec(*this, *impl_, span_source(data), remote_path, mode, {});
        return;
    }
    auto op = std::make_shared<UploadOp>();
    op->remote_path = remote_path;
    op->mode = mode;
    // The caller's buffer outlives the upload: this call blocks until it is done.
    constexpr std::size_t kChunk = 1u << 20;
    for (std::size_t off = 0; off < data.size(); off += kChunk) {
        op->in.chunks.push_back({{}, data.data() + off, std::min(kChunk, data.size() - off)});
    }
    op->in.queued = data.size();
    op->in.done = true;
    impl_->submit(op);
    wait_upload(*op);
}

void Session::upload(std::string_view data, const std::string& remote_path, int mode) {
    upload(std::as_bytes(std::span(data.data(), data.size())), remote_path, mode);
}

void Session::upload(const std::filesystem::path& local_path, const std::string& remote_path,
                     int mode) {
    std::ifstream in(local_path, std::ios::binary);
    if (!in) throw SshError("ssh upload: cannot read " + local_path.string());
    upload(
        [&](std::byte* buf, std::size_t n) {
            in.read(reinterpret_cast<char*>(buf), static_cast<std::streamsize>(n));
            if (in.bad()) throw SshError("ssh upload: error reading " + local_path.string());
            return static_cast<std::size_t>(in.gcount());
        },
        remote_path, mode);
}

void Session::upload(const UploadSource& read, const std::string& remote_path, int mode,
                     const std::function<void(std::uint64_t)>& on_progress) {
    if (!sftp_available(*impl_)) {
        upload_by_exec(*this, *impl_, read, remote_path, mode, on_progress);
        return;
    }
    auto op = std::make_shared<UploadOp>();
    op->remote_path = remote_path;
    op->mode = mode;
    impl_->submit(op);
    std::exception_ptr source_error = feed_input(
        *impl_, op->mu, op->cv, op->in, [&] { return op->finished; }, read, on_progress);
    wait_upload(*op);
    if (source_error) std::rethrow_exception(source_error);
}

namespace {
std::unique_ptr<sky::detail::Transport> open_channel(const std::shared_ptr<Session::Impl>& impl_,
                                                     const std::shared_ptr<TunnelOp>& op,
                                                     std::chrono::milliseconds timeout);
}  // namespace

std::unique_ptr<sky::detail::Transport> Session::open_tunnel(const std::string& host,
                                                             std::uint16_t port,
                                                             std::chrono::milliseconds timeout) {
    auto op = std::make_shared<TunnelOp>();
    op->target_host = host;
    op->target_port = port;
    return open_channel(impl_, op, timeout);
}

std::unique_ptr<sky::detail::Transport> Session::open_unix_socket(
    const std::string& path, std::chrono::milliseconds timeout) {
    auto op = std::make_shared<TunnelOp>();
    op->socket_path = path;
    return open_channel(impl_, op, timeout);
}

namespace {
std::unique_ptr<sky::detail::Transport> open_channel(const std::shared_ptr<Session::Impl>& impl_,
                                                     const std::shared_ptr<TunnelOp>& op,
                                                     std::chrono::milliseconds timeout) {
    op->window = std::max<std::uint32_t>(impl_->opts.tunnel_window, 256u << 10);
    impl_->submit(op);
    auto transport = std::make_unique<TunnelTransport>(impl_, op);
    std::unique_lock lk(op->mu);
    if (!op->cv.wait_for(lk, timeout, [&] { return op->opened || op->finished; })) {
        lk.unlock();
        transport->shutdown();  // the pump frees the channel once the open completes
        throw sky::TimeoutError("ssh " + impl_->label + ": tunnel to " + op->target() +
                                " not open within " + std::to_string(timeout.count()) + " ms");
    }
    if (!op->opened) {
        Failure f = op->failure;
        if (f.kind == Failure::none)
            f = {Failure::lost, "ssh " + impl_->label + ": session closed"};
        lk.unlock();
        f.raise();
    }
    return transport;
}
}  // namespace

}  // namespace sky::detail::ssh
