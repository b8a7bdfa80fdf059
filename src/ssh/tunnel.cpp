// Tunnels: direct-tcpip and direct-streamlocal channels as io::Streams. A read completes when
// channel data arrives (read straight into the caller's buffer), a write when libssh2 took the
// bytes; the channel's window is the flow control end to end (a reader that stops reading stops
// the sender).
#include <boost/asio/dispatch.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <optional>

#include "io/blocking_stream.hpp"
#include "ssh/session_impl.hpp"

namespace sky::detail::ssh {

namespace {

struct TunnelOp final : Op {
    // Set before the op is submitted.
    std::string target_host;
    std::uint16_t target_port = 0;
    std::string socket_path;  // non-empty: a Unix socket on the server (direct-streamlocal)
    std::uint32_t window = 0;
    std::chrono::milliseconds open_timeout{0};
    std::string desc;  // "ssh channel to 127.0.0.1:7100 via root@10.0.0.2:22"
    /// Strand, once: the open's outcome (Failure::none: open).
    std::function<void(const Failure&)> on_open;

    // Per libssh2 read: libssh2 widens the window by what a read asks for, so this bounds it.
    static constexpr std::size_t kMaxRead = 256u << 10;
    // Bytes per write completion, so that one tunnel's big write lets the others go.
    static constexpr std::size_t kWriteBudget = 2u << 20;
    // What try_write_some holds for the strand at most: a few call frames.
    static constexpr std::size_t kStageMax = 256u << 10;

    // Strand only.
    enum { opening, running, freeing, ended } state = opening;
    LIBSSH2_CHANNEL* ch = nullptr;
    std::unique_ptr<boost::asio::steady_timer> open_timer;
    std::optional<Strand> strand;
    Session::Impl* session = nullptr;  // set on start; the session outlives every completion
    struct PendingRead {
        boost::asio::mutable_buffer buf;
        io::IoHandler handler;
        std::size_t got = 0;
    };
    struct PendingWrite {
        std::vector<boost::asio::const_buffer> bufs;
        std::size_t index = 0;
        std::size_t done = 0;
        io::IoHandler handler;
    };
    std::optional<PendingRead> rd;
    std::optional<PendingWrite> wr;
    enum class Call { none, write, read } owner_call = Call::none;
    const char* pending_ptr = nullptr;  // a write that left a packet half sent: repeat it as is
    std::size_t pending_len = 0;
    bool pending_staged = false;  // pending_ptr points into `out`
    std::vector<char> out;        // staged bytes taken over from try_write_some, being written
    std::size_t out_off = 0;
    bool remote_eof = false;  // the far end ended its side (or the channel failed)
    bool shut = false;        // the stream was closed
    bool lost = false;        // the session ended

    // Any thread (failure()).
    mutable std::mutex failure_m;
    std::string failure_text;
    // Any thread (try_write_some): bytes a caller's thread wrote without waiting; the strand
    // writes them before any later async write.
    std::mutex stage_m;
    std::vector<char> staged;  // under stage_m
    bool stage_open = false;   // under stage_m: the channel takes bytes

    std::size_t stage(std::span<const boost::asio::const_buffer> bufs) {
        std::size_t total = 0;
        for (const auto& b : bufs) total += b.size();
        if (total == 0 || total > kStageMax) return 0;
        std::lock_guard lk(stage_m);
        if (!stage_open || staged.size() + total > kStageMax) return 0;
        for (const auto& b : bufs) {
            const char* p = static_cast<const char*>(b.data());
            staged.insert(staged.end(), p, p + b.size());
        }
        return total;
    }
    void close_stage() {
        std::lock_guard lk(stage_m);
        stage_open = false;
        staged.clear();
    }
    // The far end ended the channel (or it failed): nothing more is written.
    void far_end_closed(const std::string& why) {
        remote_eof = true;
        set_failure(why);
        close_stage();
        if (!pending_ptr) {
            out.clear();
            out_off = 0;
        }
    }

    std::string target() const {
        return socket_path.empty() ? target_host + ":" + std::to_string(target_port)
                                   : "unix:" + socket_path;
    }
    void set_failure(const std::string& text) {
        std::lock_guard lk(failure_m);
        if (failure_text.empty()) failure_text = text;
    }
    std::string failure() const {
        std::lock_guard lk(failure_m);
        return failure_text;
    }

    std::string open_message() const {
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
        // direct-tcpip: host to connect, port, originator address, originator port.
        put32(m, static_cast<std::uint32_t>(target_host.size()));
        m += target_host;
        put32(m, target_port);
        std::string origin = "127.0.0.1";
        put32(m, static_cast<std::uint32_t>(origin.size()));
        m += origin;
        put32(m, 22);
        return m;
    }

    // Runs the handler now when the pump got here on its own (the socket, a wake), else
    // posts it: never inside the call that started an operation.
    void complete(io::IoHandler h, boost::system::error_code ec, std::size_t n) {
        if (session && !session->post_completions) {
            boost::asio::dispatch(*strand, boost::asio::append(std::move(h), ec, n));
        } else {
            complete_later(*strand, std::move(h), ec, n);
        }
    }
    void complete_read(boost::system::error_code ec, std::size_t n) {
        auto r = std::move(*rd);
        rd.reset();
        complete(std::move(r.handler), ec, n);
    }
    void complete_write(boost::system::error_code ec, std::size_t n) {
        auto w = std::move(*wr);
        wr.reset();
        complete(std::move(w.handler), ec, n);
    }
    // Steps the session for an operation just started: what completes now is posted.
    static void pump_started(Session::Impl& s) {
        const bool before = s.post_completions;
        s.post_completions = true;
        s.pump();
        s.post_completions = before;
    }
    void opened(const Failure& f) {
        if (open_timer) open_timer->cancel();
        if (auto cb = std::move(on_open)) {
            on_open = nullptr;
            cb(f);
        }
    }

    // What a new operation completes with at once, if anything.
    std::optional<boost::system::error_code> refused(bool writing) {
        if (shut) return boost::asio::error::operation_aborted;
        if (lost) return make_error(StreamErrc::connection_lost);
        if (writing && (remote_eof || state != running)) {
            set_failure(desc + ": closed by the remote end");
            return make_error(StreamErrc::closed_by_remote);
        }
        if (!writing && (remote_eof || state != running)) return boost::asio::error::eof;
        return std::nullopt;
    }

    void start_read(Session::Impl& s, boost::asio::mutable_buffer buf, io::IoHandler h) {
        if (rd) {  // one read at a time (io::Stream's contract)
            complete_later(*strand, std::move(h), boost::asio::error::in_progress, std::size_t{0});
            return;
        }
        auto now = refused(false);
        if (!now && buf.size() == 0) now = boost::system::error_code();
        if (now) {
            complete_later(*strand, std::move(h), *now, std::size_t{0});
            return;
        }
        rd = PendingRead{buf, std::move(h)};
        pump_started(s);
    }

    void start_write(Session::Impl& s, std::vector<boost::asio::const_buffer> bufs,
                     io::IoHandler h) {
        if (wr) {
            complete_later(*strand, std::move(h), boost::asio::error::in_progress, std::size_t{0});
            return;
        }
        std::size_t total = 0;
        for (const auto& b : bufs) total += b.size();
        auto now = refused(true);
        if (!now && total == 0) now = boost::system::error_code();
        if (now) {
            complete_later(*strand, std::move(h), *now, std::size_t{0});
            return;
        }
        wr = PendingWrite{std::move(bufs), 0, 0, std::move(h)};
        pump_started(s);
    }

    void shutdown(Session::Impl& s) {
        if (shut) return;
        shut = true;
        close_stage();
        if (rd) complete_read(boost::asio::error::operation_aborted, 0);
        // A write whose packet is half sent: libssh2 keeps the bytes, so the caller's buffer is
        // free; the repeat goes on without it.
        if (wr) complete_write(boost::asio::error::operation_aborted, 0);
        s.pump();
    }

    // The session ended (or the open failed): everything completes with the reason.
    void end(const Failure& f) {
        state = ended;
        close_stage();
        if (f.kind == Failure::lost) lost = true;
        set_failure(f.message);
        opened(f);
        const auto ec =
            lost ? make_error(StreamErrc::connection_lost) : make_error(StreamErrc::channel_failed);
        if (rd) complete_read(shut ? boost::asio::error::operation_aborted : ec, 0);
        if (wr) complete_write(ec, 0);
    }
    void abort(const Failure& f) override {
        ch = nullptr;
        end(f);
    }

    void start(Session::Impl& s) override {
        session = &s;
        if (open_timeout.count() <= 0) return;
        open_timer = std::make_unique<boost::asio::steady_timer>(s.strand, open_timeout);
        open_timer->async_wait([op = std::static_pointer_cast<TunnelOp>(shared_from_this()),
                                im = s.shared_from_this()](boost::system::error_code ec) {
            if (ec || !op->on_open) return;
            op->opened({Failure::timeout, "ssh " + im->label + ": tunnel to " + op->target() +
                                              " not open within " +
                                              std::to_string(op->open_timeout.count()) + " ms"});
            op->shut = true;  // the channel is freed once its open completes
            im->wake();
        });
    }

    Step step(Session::Impl& s) override {
        switch (state) {
            case opening: {
                if (shut && s.opener != this) {  // given up before its open began
                    state = ended;
                    return Step::done;
                }
                Failure f;
                const std::string type =
                    socket_path.empty() ? "direct-tcpip" : "direct-streamlocal@openssh.com";
                auto r = s.open_channel(this, type, window, open_message(),
                                        "cannot open a tunnel to " + target(), &ch, &f);
                if (r == Session::Impl::Open::wait) return Step::idle;
                if (r == Session::Impl::Open::failed) {
                    end(f);
                    return Step::done;
                }
                state = shut ? freeing : running;
                if (!shut) {
                    std::lock_guard lk(stage_m);
                    stage_open = true;
                }
                opened({});
                return Step::progress;
            }
            case running:
                return run(s);
            case freeing: {
                int rc = libssh2_channel_free(ch);
                if (s.would_block(rc)) return Step::idle;
                ch = nullptr;
                state = ended;
                return Step::done;
            }
            case ended:
                return Step::done;
        }
        return Step::idle;
    }

    // One libssh2 write of the next piece: staged bytes first, then the pending write (or the
    // repeat of a call that left a packet half sent). False when writing stops for now.
    bool write_once(Session::Impl& s, bool* progressed) {
        if (!pending_ptr) {
            if (out_off < out.size()) {
                pending_ptr = out.data() + out_off;
                pending_len = out.size() - out_off;
                pending_staged = true;
            } else if (wr) {
                auto& w = *wr;
                while (w.index < w.bufs.size() && w.bufs[w.index].size() == 0) ++w.index;
                if (w.index == w.bufs.size()) {
                    complete_write({}, w.done);
                    return false;
                }
                pending_ptr = static_cast<const char*>(w.bufs[w.index].data());
                pending_len = w.bufs[w.index].size();
                pending_staged = false;
            } else {
                return false;
            }
        }
        ssize_t n = libssh2_channel_write(ch, pending_ptr, pending_len);
        if (n == LIBSSH2_ERROR_EAGAIN) {
            if (s.eagain()) {
                owner_call = Call::write;  // pending_ptr stays: the very same call goes next
                return false;
            }
            pending_ptr = nullptr;
            // The window is closed. A far end that has gone will never open it again.
            if (libssh2_channel_eof(ch) == 1) {
                far_end_closed(desc + ": closed by the remote end");
                if (wr) complete_write(make_error(StreamErrc::closed_by_remote), 0);
            } else if (wr && wr->done > 0) {
                complete_write({}, wr->done);
            }
            return false;
        }
        pending_ptr = nullptr;
        if (n < 0) {
            auto f = s.error(static_cast<int>(n), "tunnel write");
            if (f.kind == Failure::lost) {
                end(f);
                return false;
            }
            far_end_closed(f.message);
            if (wr) complete_write(make_error(StreamErrc::closed_by_remote), 0);
            return false;
        }
        *progressed = true;
        if (pending_staged) {
            out_off += static_cast<std::size_t>(n);
            return true;
        }
        if (!wr) return true;  // the write completed (shutdown) while its packet was half sent
        auto& w = *wr;
        w.bufs[w.index] += static_cast<std::size_t>(n);
        w.done += static_cast<std::size_t>(n);
        if (w.bufs[w.index].size() == 0) ++w.index;
        if (w.index == w.bufs.size() || w.done >= kWriteBudget) {
            complete_write({}, w.done);
            return false;
        }
        return true;
    }

    // Takes over what try_write_some staged, once the last of it is written.
    bool take_staged() {
        if (out_off < out.size() || (pending_ptr && pending_staged)) return true;
        out.clear();
        out_off = 0;
        std::lock_guard lk(stage_m);
        if (staged.empty()) return false;
        out.swap(staged);
        return true;
    }

    // One libssh2 read into the pending read's buffer (or, with `repeat` and no read pending, a
    // zero-length read that only finishes a half-sent window adjust). False when reading stops.
    bool read_once(Session::Impl& s, bool* progressed, bool repeat) {
        char dummy = 0;
        char* dst = &dummy;
        std::size_t len = 0;
        if (rd) {
            dst = static_cast<char*>(rd->buf.data()) + rd->got;
            len = std::min(rd->buf.size() - rd->got, kMaxRead);
        } else if (!repeat) {
            return false;
        }
        ssize_t n = libssh2_channel_read(ch, dst, len);
        if (n == LIBSSH2_ERROR_EAGAIN) {
            if (s.eagain()) owner_call = Call::read;  // a half-sent window adjust
            return false;
        }
        if (n < 0) {
            auto f = s.error(static_cast<int>(n), "tunnel read");
            if (f.kind == Failure::lost) {
                end(f);
                return false;
            }
            // A channel-level error ends the stream like the far end closing it.
            far_end_closed(f.message);
            if (rd)
                complete_read(rd->got ? boost::system::error_code() : boost::asio::error::eof,
                              rd->got);
            return false;
        }
        if (len == 0) return false;  // the adjust went out; nothing was asked for
        *progressed = true;
        if (n == 0) {
            far_end_closed(desc + ": closed by the remote end");
            complete_read(rd->got ? boost::system::error_code() : boost::asio::error::eof, rd->got);
            return false;
        }
        rd->got += static_cast<std::size_t>(n);
        if (rd->got == rd->buf.size()) {
            complete_read({}, rd->got);
            return false;
        }
        return true;
    }

    Step run(Session::Impl& s) {
        bool progressed = false;
        if (s.send_owner == this) {
            // Only the call that left a packet half sent may run, with the same arguments.
            Call c = owner_call;
            owner_call = Call::none;
            if (c == Call::write && pending_ptr) {
                write_once(s, &progressed);
            } else if (c == Call::read) {
                read_once(s, &progressed, true);
            }
            if (state == ended) return Step::done;
            if (owner_call != Call::none) return progressed ? Step::progress : Step::idle;
        }
        if (shut) {
            state = freeing;
            return Step::progress;
        }
        for (int i = 0; i < 64 && (take_staged() || wr) && !remote_eof; ++i) {
            if (!write_once(s, &progressed)) break;
        }
        if (state == ended) return Step::done;
        if (owner_call != Call::none) return progressed ? Step::progress : Step::idle;
        if (wr && remote_eof) {
            set_failure(desc + ": closed by the remote end");
            complete_write(make_error(StreamErrc::closed_by_remote), 0);
        }
        // Reads go as far as the data that is there: the caller gets it in one completion.
        for (int i = 0; i < 64 && rd && !remote_eof; ++i) {
            if (!read_once(s, &progressed, false)) break;
        }
        if (state == ended) return Step::done;
        if (rd && rd->got > 0) complete_read({}, rd->got);
        if (rd && remote_eof) complete_read(boost::asio::error::eof, 0);
        return progressed ? Step::progress : Step::idle;
    }
};

class TunnelStream final : public io::Stream {
public:
    TunnelStream(std::shared_ptr<Session::Impl> session, std::shared_ptr<TunnelOp> op)
        : session_(std::move(session)), op_(std::move(op)) {}
    ~TunnelStream() override { close(); }

    executor_type get_executor() override { return *op_->strand; }

    void async_read_some(boost::asio::mutable_buffer buffer, io::IoHandler handler) override {
        boost::asio::dispatch(*op_->strand,
                              [s = session_, op = op_, buffer, h = std::move(handler)]() mutable {
                                  op->start_read(*s, buffer, std::move(h));
                              });
    }

    void async_write_some(std::span<const boost::asio::const_buffer> buffers,
                          io::IoHandler handler) override {
        std::vector<boost::asio::const_buffer> bufs(buffers.begin(), buffers.end());
        boost::asio::dispatch(*op_->strand, [s = session_, op = op_, bufs = std::move(bufs),
                                             h = std::move(handler)]() mutable {
            op->start_write(*s, std::move(bufs), std::move(h));
        });
    }

    // A small write from the caller's thread: copied for the strand, which is woken to send it
    // (the low-latency path of a call frame; no completion to wait for).
    std::size_t try_write_some(std::span<const boost::asio::const_buffer> buffers) override {
        const std::size_t n = op_->stage(buffers);
        if (n > 0) session_->wake();
        return n;
    }

    void close() noexcept override {
        try {
            boost::asio::post(*op_->strand, [s = session_, op = op_] { op->shutdown(*s); });
        } catch (...) {
            // Out of memory: the session's end still frees the channel.
        }
    }

    [[nodiscard]] std::string describe() const override { return op_->desc; }
    [[nodiscard]] std::string failure() const override { return op_->failure(); }

private:
    std::shared_ptr<Session::Impl> session_;
    std::shared_ptr<TunnelOp> op_;
};

std::shared_ptr<TunnelOp> make_tunnel(Session::Impl& im, std::chrono::milliseconds timeout) {
    auto op = std::make_shared<TunnelOp>();
    op->window = std::max<std::uint32_t>(im.opts.tunnel_window, 256u << 10);
    op->open_timeout = timeout;
    op->strand = im.strand;
    return op;
}

std::unique_ptr<io::Stream> open_now(Session::Impl& im, const std::shared_ptr<TunnelOp>& op) {
    op->desc = "ssh channel to " + op->target() + " via " + im.label;
    auto opened = std::make_shared<Waiter<Failure>>("ssh::Session::open_tunnel");
    op->on_open = [opened](const Failure& f) { opened->set(f); };
    im.submit(op);
    if (Failure f = opened->get(); f.kind != Failure::none) f.raise();
    return std::make_unique<TunnelStream>(im.shared_from_this(), op);
}

void open_later(Session::Impl& im, const std::shared_ptr<TunnelOp>& op, TunnelHandler handler) {
    op->desc = "ssh channel to " + op->target() + " via " + im.label;
    auto h = std::make_shared<TunnelHandler>(std::move(handler));
    std::weak_ptr<TunnelOp> weak = op;
    op->on_open = [h, weak, im = im.shared_from_this()](const Failure& f) {
        auto op = weak.lock();
        if (f.kind != Failure::none || !op) {
            complete_later(im->strand, std::move(*h), f.exception(), std::unique_ptr<io::Stream>());
            return;
        }
        complete_later(im->strand, std::move(*h), std::exception_ptr(),
                       std::unique_ptr<io::Stream>(std::make_unique<TunnelStream>(im, op)));
    };
    im.submit(op);
}

void raise_ssh_error(const boost::system::error_code& ec, const std::string& failure,
                     const std::string& describe) {
    if (ec.category() == stream_category()) {
        const std::string text = failure.empty() ? describe + ": " + ec.message() : failure;
        if (ec.value() == static_cast<int>(StreamErrc::connection_lost)) throw ConnectionLost(text);
        throw ChannelError(text);
    }
    if (ec == boost::asio::error::operation_aborted) {
        throw ChannelError(describe + ": write after shutdown");
    }
}

}  // namespace

std::unique_ptr<io::Stream> Session::open_tunnel(const std::string& host, std::uint16_t port,
                                                 std::chrono::milliseconds timeout) {
    auto op = make_tunnel(*impl_, timeout);
    op->target_host = host;
    op->target_port = port;
    return open_now(*impl_, op);
}

void Session::async_open_tunnel(const std::string& host, std::uint16_t port,
                                std::chrono::milliseconds timeout, TunnelHandler handler) {
    auto op = make_tunnel(*impl_, timeout);
    op->target_host = host;
    op->target_port = port;
    open_later(*impl_, op, std::move(handler));
}

std::unique_ptr<io::Stream> Session::open_unix_socket(const std::string& path,
                                                      std::chrono::milliseconds timeout) {
    auto op = make_tunnel(*impl_, timeout);
    op->socket_path = path;
    return open_now(*impl_, op);
}

void Session::async_open_unix_socket(const std::string& path, std::chrono::milliseconds timeout,
                                     TunnelHandler handler) {
    auto op = make_tunnel(*impl_, timeout);
    op->socket_path = path;
    open_later(*impl_, op, std::move(handler));
}

std::unique_ptr<sky::detail::Transport> blocking_transport(std::unique_ptr<io::Stream> tunnel) {
    return std::make_unique<io::BlockingStream>(std::move(tunnel), raise_ssh_error);
}

}  // namespace sky::detail::ssh
