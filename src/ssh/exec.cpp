// Exec: a command on a session channel, its stdin written and its output read together, a
// timeout as a timer on the strand (which kills the command's process group), and the output
// handed to a line callback or captured with a cap.
#include <boost/asio/steady_timer.hpp>
#include <cstdlib>

#include "ssh/session_impl.hpp"

namespace sky::detail::ssh {

// ------------------------------------------------------------------------------------------------
// Input (shared with uploads)

std::span<const std::byte> Input::peek() {
    std::lock_guard lk(mu);
    if (stopped || chunks.empty()) return {};
    const auto& c = chunks.front();
    return {c.data + taken, c.size - taken};
}

void Input::consume(std::size_t n) {
    std::lock_guard lk(mu);
    taken += n;
    if (taken == chunks.front().size) {
        taken = 0;
        queued -= chunks.front().size;
        chunks.pop_front();
        cv.notify_all();
    }
}

bool Input::exhausted() {
    std::lock_guard lk(mu);
    return stopped || (done && chunks.empty());
}

void Input::stop() {
    std::lock_guard lk(mu);
    stopped = true;
    chunks.clear();
    queued = 0;
    taken = 0;
    cv.notify_all();
}

namespace {

// sshd makes the command's shell a process-group leader (setsid); its pid, sent first on stderr,
// lets a timeout kill the whole group. (libssh2 1.10 cannot send "signal" requests, and closing
// the channel leaves a silent command running.)
constexpr const char* kPidMarker = "\036sky-pid ";
constexpr const char* kPidMarkerCommand = "printf '\\036sky-pid %d\\n' $$ >&2; ";

// Where a command's output and end go (strand).
struct ExecSink {
    virtual ~ExecSink() = default;
    /// Output of stdout (0) or stderr (1), the pid line taken out.
    virtual void output(int stream, std::string_view data) = 0;
    /// True while the sink holds all it takes: the op stops reading for now.
    virtual bool full() = 0;
    /// Once: the exit status (result) or the failure.
    virtual void finished(const ExecResult& result, const Failure& failure) = 0;
};

struct ExecOp final : Op {
    std::string command;  // as sent, with the pid marker
    std::string shown;    // as the caller gave it, for messages
    std::string stdin_data;
    std::shared_ptr<Input> input;  // streamed stdin instead of stdin_data (upload through exec)
    std::shared_ptr<ExecSink> sink;
    std::chrono::milliseconds timeout{0};
    bool kill_on_timeout = true;  // not for the kill command itself

    // Strand only.
    enum { opening, starting, streaming, closing, freeing } state = opening;
    enum class Call { none, write, eof, read } owner_call = Call::none;
    int owner_stream = 0;
    bool stdin_done = false;  // written (or abandoned because the command ended)
    bool eof_sent = false;
    LIBSSH2_CHANNEL* ch = nullptr;
    std::size_t stdin_off = 0;
    bool eof[2] = {false, false};
    std::string err_head;  // stderr until the pid line is parsed
    bool pid_seen = false;
    long remote_pid = 0;
    bool cancel = false;     // close the channel now (timeout)
    bool timed_out = false;  // the timer fired
    bool delivered = false;  // the sink has the end
    std::unique_ptr<boost::asio::steady_timer> timer;
    std::string label;
    int exit_status = -1;
    std::string exit_signal;
    Failure failure;

    std::shared_ptr<ExecOp> self() { return std::static_pointer_cast<ExecOp>(shared_from_this()); }

    void start(Session::Impl& s) override {
        label = s.label;
        if (timeout.count() <= 0) return;
        timer = std::make_unique<boost::asio::steady_timer>(s.strand, timeout);
        timer->async_wait([op = self(), im = s.shared_from_this()](boost::system::error_code ec) {
            if (!ec) op->expired(*im);
        });
    }

    // The timer fired: kill the command's process group (so the channel ends), then close the
    // channel; the caller hears of the timeout within 2 s whether the channel closed or not.
    void expired(Session::Impl& s) {
        if (delivered) return;
        timed_out = true;
        if (!kill_on_timeout || remote_pid <= 1) {
            close_now(s);
            return;
        }
        struct AfterKill final : ExecSink {
            std::shared_ptr<ExecOp> op;
            std::shared_ptr<Session::Impl> im;
            void output(int, std::string_view) override {}
            bool full() override { return false; }
            void finished(const ExecResult&, const Failure&) override {
                // The session may be the reason of the timeout; closing goes on anyway.
                op->close_now(*im);
                op.reset();
                im.reset();
            }
        };
        auto after = std::make_shared<AfterKill>();
        after->op = self();
        after->im = s.shared_from_this();
        auto kill = std::make_shared<ExecOp>();
        kill->shown = "kill -KILL -- -" + std::to_string(remote_pid) + " 2>/dev/null; true";
        kill->command = std::string(kPidMarkerCommand) + kill->shown;
        kill->timeout = std::chrono::seconds(5);
        kill->kill_on_timeout = false;
        kill->sink = std::move(after);
        s.submit(std::move(kill));
    }

    void close_now(Session::Impl& s) {
        if (delivered) return;
        cancel = true;
        if (!timer) timer = std::make_unique<boost::asio::steady_timer>(s.strand);
        timer->expires_after(std::chrono::seconds(2));
        timer->async_wait([op = self()](boost::system::error_code ec) {
            if (!ec) op->deliver();
        });
        s.wake();
    }

    // Hands the output on, the pid line taken out of stderr first.
    void output(int stream, std::string_view data) {
        if (delivered) return;
        if (stream == 0 || pid_seen) {
            sink->output(stream, data);
            return;
        }
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
        if (!head.empty()) sink->output(1, head);
        err_head.clear();
    }

    // The sink learns the end, once.
    void deliver() {
        if (delivered) return;
        if (!pid_seen && !err_head.empty()) sink->output(1, err_head);
        delivered = true;
        if (timer) timer->cancel();
        if (input) input->stop();
        Failure f = failure;
        if (timed_out) {
            f = {Failure::timeout, "ssh " + label + ": command did not finish within " +
                                       std::to_string(timeout.count()) +
                                       " ms: " + shown.substr(0, 200)};
        }
        ExecResult r;
        r.exit_status = exit_status;
        r.exit_signal = exit_signal;
        sink->finished(r, f);
    }

    void finish(Failure f = {}) {
        if (f.kind != Failure::none && failure.kind == Failure::none) failure = std::move(f);
        deliver();
    }
    void abort(const Failure& f) override {
        ch = nullptr;
        finish(f);
    }

    // What to write to the command's stdin next (empty: nothing now, or nothing more).
    std::span<const std::byte> next_stdin() {
        if (!input) {
            return std::as_bytes(std::span(stdin_data))
                .subspan(std::min(stdin_off, stdin_data.size()));
        }
        return input->peek();
    }
    void consume_stdin(std::size_t n) {
        if (input) {
            input->consume(n);
        } else {
            stdin_off += n;
        }
    }
    void drop_stdin() {
        stdin_off = stdin_data.size();
        if (input) input->stop();
    }
    bool stdin_exhausted() { return input ? input->exhausted() : stdin_off >= stdin_data.size(); }

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
            if (sink->full() && redo != Call::read) continue;
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
                output(stream, std::string_view(buf, static_cast<std::size_t>(n)));
                if (sink->full()) break;
            }
        }
        if (eof[0] && eof[1]) {
            state = closing;
            return Step::progress;
        }
        return progressed ? Step::progress : Step::idle;
    }

    Step step(Session::Impl& s) override {
        if (state < closing && s.send_owner != this && cancel) {
            if (state == opening) {
                if (s.opener != this) {
                    finish();
                    return Step::done;
                }
            } else {
                state = freeing;
            }
        }
        switch (state) {
            case opening: {
                Failure f;
                auto r = s.open_channel(this, "session", 2u << 20, {},
                                        "cannot open a session channel", &ch, &f, true);
                if (r == Session::Impl::Open::wait) return Step::idle;
                if (r == Session::Impl::Open::failed) {
                    finish(f);
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
                finish();
                return Step::done;
            }
        }
        return Step::idle;
    }
};

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

// The blocking exec's sink: a queue the caller's thread drains (its callbacks run there).
struct QueueSink final : ExecSink {
    static constexpr std::size_t kLimit = 4u << 20;
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::pair<int, std::string>> chunks;
    std::size_t queued = 0;
    bool done = false;
    ExecResult result;
    Failure failure;

    void output(int stream, std::string_view data) override {
        std::lock_guard lk(mu);
        chunks.emplace_back(stream, std::string(data));
        queued += data.size();
        cv.notify_all();
    }
    bool full() override {
        std::lock_guard lk(mu);
        return queued >= kLimit;
    }
    void finished(const ExecResult& r, const Failure& f) override {
        std::lock_guard lk(mu);
        result = r;
        failure = f;
        done = true;
        cv.notify_all();
    }

    // Caller's thread: the output to the callbacks or captures until the end.
    ExecResult collect(Session::Impl& im, const ExecOptions& options) {
        ExecResult r;
        LineSink out{&options.on_stdout, &r.out, options.capture_limit, {}};
        LineSink err{&options.on_stderr, &r.err, options.capture_limit, {}};
        for (;;) {
            std::deque<std::pair<int, std::string>> taken;
            bool end = false;
            bool was_full = false;
            {
                std::unique_lock lk(mu);
                cv.wait(lk, [&] { return !chunks.empty() || done; });
                taken.swap(chunks);
                was_full = queued >= kLimit;
                queued = 0;
                end = done;
            }
            if (was_full) im.wake();  // the op stopped reading on a full queue
            for (auto& [stream, data] : taken) (stream == 0 ? out : err).feed(data);
            if (end) break;
        }
        out.flush();
        err.flush();
        if (failure.kind != Failure::none) failure.raise();
        r.exit_status = result.exit_status;
        r.exit_signal = result.exit_signal;
        return r;
    }
};

// The asynchronous exec's sink: the callbacks run on the strand, the handler gets the end.
struct HandlerSink final : ExecSink {
    HandlerSink(ExecOptions o, ExecHandler h, Strand s)
        : options(std::move(o)), handler(std::move(h)), strand(std::move(s)) {}
    ExecOptions options;
    ExecHandler handler;
    Strand strand;
    ExecResult result;
    LineSink out{&options.on_stdout, &result.out, options.capture_limit, {}};
    LineSink err{&options.on_stderr, &result.err, options.capture_limit, {}};

    void output(int stream, std::string_view data) override {
        try {
            (stream == 0 ? out : err).feed(data);
        } catch (...) {
            // A throwing callback must not take the strand down; its output is lost.
        }
    }
    bool full() override { return false; }
    void finished(const ExecResult& r, const Failure& f) override {
        try {
            out.flush();
            err.flush();
        } catch (...) {
        }
        if (f.kind != Failure::none) {
            complete_later(strand, std::move(handler), f.exception(), ExecResult{});
            return;
        }
        result.exit_status = r.exit_status;
        result.exit_signal = r.exit_signal;
        complete_later(strand, std::move(handler), std::exception_ptr(), std::move(result));
    }
};

std::shared_ptr<ExecOp> make_exec(std::string_view command, const ExecOptions& options,
                                  std::shared_ptr<ExecSink> sink) {
    auto op = std::make_shared<ExecOp>();
    op->shown = std::string(command);
    op->command = std::string(kPidMarkerCommand) + op->shown;
    op->stdin_data = options.stdin_data;
    op->timeout = options.timeout;
    op->sink = std::move(sink);
    return op;
}

}  // namespace

ExecResult Session::exec(std::string_view command, const ExecOptions& options) {
    io::forbid_blocking_on_io_thread("ssh::Session::exec");
    auto sink = std::make_shared<QueueSink>();
    impl_->submit(make_exec(command, options, sink));
    return sink->collect(*impl_, options);
}

void Session::async_exec(std::string command, ExecOptions options, ExecHandler handler) {
    auto op = make_exec(command, options, nullptr);
    op->sink = std::make_shared<HandlerSink>(std::move(options), std::move(handler), impl_->strand);
    impl_->submit(std::move(op));
}

ExecResult exec_with_input(Session::Impl& im, std::string_view command,
                           const std::shared_ptr<Input>& input, const std::function<void()>& feed,
                           const ExecOptions& options) {
    io::forbid_blocking_on_io_thread("ssh::Session::upload");
    auto sink = std::make_shared<QueueSink>();
    auto op = make_exec(command, options, sink);
    op->input = input;
    im.submit(op);
    feed();
    im.wake();
    return sink->collect(im, options);
}

}  // namespace sky::detail::ssh
