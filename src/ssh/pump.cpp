// The channel pump: a session's strand steps its operations, batches their socket writes, reads
// the socket 256 KiB at a time, and waits for the socket's readiness on the I/O core.
#include <sys/socket.h>

#include <boost/asio/error.hpp>
#include <cerrno>
#include <cstring>
#include <future>

#include "io/io_core.hpp"
#include "ssh/session_impl.hpp"

namespace sky::detail::ssh {

// ------------------------------------------------------------------------------------------------
// Errors

void Failure::raise() const { std::rethrow_exception(exception()); }

std::exception_ptr Failure::exception() const {
    switch (kind) {
        case lost:
            return std::make_exception_ptr(ConnectionLost(message));
        case timeout:
            return std::make_exception_ptr(sky::TimeoutError(message));
        default:
            return std::make_exception_ptr(ChannelError(message));
    }
}

namespace {
class StreamCategory final : public boost::system::error_category {
public:
    [[nodiscard]] const char* name() const noexcept override { return "sky.ssh"; }
    [[nodiscard]] std::string message(int e) const override {
        switch (static_cast<StreamErrc>(e)) {
            case StreamErrc::connection_lost:
                return "ssh connection lost";
            case StreamErrc::channel_failed:
                return "ssh channel failed";
            case StreamErrc::closed_by_remote:
                return "ssh channel closed by the remote end";
        }
        return "ssh error";
    }
};
}  // namespace

const boost::system::error_category& stream_category() noexcept {
    static const StreamCategory c;
    return c;
}

boost::system::error_code make_error(StreamErrc e) noexcept {
    return {static_cast<int>(e), stream_category()};
}

std::string session_error(LIBSSH2_SESSION* s) {
    char* msg = nullptr;
    int len = 0;
    libssh2_session_last_error(s, &msg, &len, 0);
    return msg ? std::string(msg, static_cast<std::size_t>(len)) : std::string("unknown error");
}

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

// ------------------------------------------------------------------------------------------------
// The session's state

Session::Impl::Impl(SessionOptions options)
    : opts(std::move(options)),
      strand(boost::asio::make_strand(io::executor())),
      sock(strand),
      keepalive_timer(strand),
      rbuf(new char[kReadBuf]) {}

Session::Impl::~Impl() {
    // The last reference: no handler of this session is pending, so nothing else touches it.
    teardown();
}

void Session::Impl::submit(std::shared_ptr<Op> op) {
    post([self = shared_from_this(), op = std::move(op)]() mutable {
        if (self->dead || self->phase != Phase::up) {
            op->abort(self->dead
                          ? self->death
                          : Failure{Failure::lost, "ssh " + self->label + ": session closed"});
            return;
        }
        op->start(*self);
        self->ops.push_back(std::move(op));
        self->pump();
    });
}

void Session::Impl::wake() {
    if (pump_posted.exchange(true)) return;
    post([self = shared_from_this()] {
        self->pump_posted = false;
        self->pump();
    });
}

bool Session::Impl::eagain() {
    round_eagain = true;
    int dirs = libssh2_session_block_directions(s);
    round_dirs |= dirs;
    return (dirs & LIBSSH2_SESSION_BLOCK_OUTBOUND) != 0;
}

bool Session::Impl::would_block(long rc) {
    if (rc != LIBSSH2_ERROR_EAGAIN) return false;
    eagain();
    return true;
}

Failure Session::Impl::error(int rc, const std::string& what) {
    std::string msg = "ssh " + label + ": " + what + ": " + session_error(s);
    if (channel_level(rc)) return {Failure::channel, msg};
    die({Failure::lost,
         "ssh " + label + ": connection lost (" + what + ": " + session_error(s) + ")"});
    return death;
}

void Session::Impl::die(Failure f) {
    if (dead) return;
    death = std::move(f);
    dead = true;
}

Session::Impl::Open Session::Impl::open_channel(Op* op, std::string_view type, unsigned window,
                                                std::string_view message, const std::string& what,
                                                LIBSSH2_CHANNEL** channel, Failure* failure,
                                                bool keep_slot) {
    if (opener && opener != op) return Open::wait;
    opener = op;
    *channel = libssh2_channel_open_ex(
        s, type.data(), static_cast<unsigned>(type.size()), window, LIBSSH2_CHANNEL_PACKET_DEFAULT,
        message.empty() ? nullptr : message.data(), static_cast<unsigned>(message.size()));
    if (!*channel) {
        int rc = 0;
        if (null_would_block(&rc)) return Open::wait;
        opener = nullptr;
        *failure = error(rc, what);
        return Open::failed;
    }
    if (!keep_slot) opener = nullptr;
    return Open::opened;
}

// ------------------------------------------------------------------------------------------------
// Buffered socket I/O

void Session::Impl::flush() {
    const int fd = sock.native_handle();
    while (pending_out() > 0 && sock_error == 0) {
        ssize_t n = ::send(fd, wbuf.data() + whead, pending_out(), MSG_NOSIGNAL);
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

ssize_t Session::Impl::send_cb(libssh2_socket_t, const void* buf, std::size_t len, int,
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
    // Batch a few packets per send, not a whole step's worth: the server works on the first
    // ones while libssh2 encrypts the next.
    if (im->pending_out() >= kFlushAt) im->flush();
    return static_cast<ssize_t>(len);
}

// Reads what the socket has into the free end of rbuf. Also when no operation wants bytes: the
// end of the connection is noticed, and a full rbuf stops the reading (TCP flow control).
void Session::Impl::pull() {
    if (peer_closed || recv_error || !sock.is_open()) return;
    if (rhead == rtail) {
        rhead = rtail = 0;
    } else if (rtail == kReadBuf && rhead > 0) {
        std::memmove(rbuf.get(), rbuf.get() + rhead, rtail - rhead);
        rtail -= rhead;
        rhead = 0;
    }
    if (rtail == kReadBuf) return;
    for (;;) {
        ssize_t n = ::recv(sock.native_handle(), rbuf.get() + rtail, kReadBuf - rtail, 0);
        if (n > 0) {
            rtail += static_cast<std::size_t>(n);
        } else if (n == 0) {
            peer_closed = true;
        } else if (errno == EINTR) {
            continue;
        } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
            recv_error = errno;
        }
        return;
    }
}

ssize_t Session::Impl::recv_cb(libssh2_socket_t, void* buf, std::size_t len, int, void** abstract) {
    auto* im = static_cast<Impl*>(*abstract);
    if (im->rhead == im->rtail) {
        if (im->recv_error) return -im->recv_error;
        if (im->peer_closed) return 0;
        im->rhead = im->rtail = 0;
        ssize_t n = ::recv(im->sock.native_handle(), im->rbuf.get(), kReadBuf, 0);
        if (n < 0) {
            int e = errno;
            if (e != EAGAIN && e != EWOULDBLOCK && e != EINTR) im->recv_error = e;
            return -e;
        }
        if (n == 0) {
            im->peer_closed = true;
            return 0;
        }
        im->rtail = static_cast<std::size_t>(n);
    }
    std::size_t n = std::min(len, im->rtail - im->rhead);
    std::memcpy(buf, im->rbuf.get() + im->rhead, n);
    im->rhead += n;
    return static_cast<ssize_t>(n);
}

void Session::Impl::arm(bool read, bool write) {
    if (!sock.is_open()) return;
    read = read && !peer_closed && !recv_error && rtail - rhead < kReadBuf;
    write = write && sock_error == 0;
    auto on_ready = [](const std::shared_ptr<Impl>& self) {
        if (self->phase == Phase::connecting) {
            if (self->connect_step) self->connect_step();
        } else {
            self->pump();
        }
    };
    if (read && !read_armed) {
        read_armed = true;
        sock.async_wait(boost::asio::posix::descriptor_base::wait_read,
                        [self = shared_from_this(), gen = sock_gen,
                         on_ready](const boost::system::error_code& ec) {
                            if (gen != self->sock_gen) return;
                            self->read_armed = false;
                            if (ec == boost::asio::error::operation_aborted) return;
                            self->pull();
                            on_ready(self);
                        });
    }
    if (write && !write_armed) {
        write_armed = true;
        sock.async_wait(boost::asio::posix::descriptor_base::wait_write,
                        [self = shared_from_this(), gen = sock_gen,
                         on_ready](const boost::system::error_code& ec) {
                            if (gen != self->sock_gen) return;
                            self->write_armed = false;
                            if (ec == boost::asio::error::operation_aborted) return;
                            self->flush();
                            on_ready(self);
                        });
    }
}

void Session::Impl::reset_socket_state() {
    boost::system::error_code ignored;
    sock.close(ignored);
    ++sock_gen;
    read_armed = write_armed = false;
    wbuf.clear();
    whead = rhead = rtail = 0;
    sock_error = recv_error = 0;
    peer_closed = false;
}

void Session::Impl::start_keepalive() {
    if (opts.keepalive_interval.count() <= 0 || phase != Phase::up) return;
    keepalive_timer.expires_after(opts.keepalive_interval);
    keepalive_timer.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
        if (ec || self->phase != Phase::up) return;
        if (!self->dead && !self->send_owner && !self->keepalive_owner) {
            int next = 0;
            int rc = libssh2_keepalive_send(self->s, &next);
            if (rc == LIBSSH2_ERROR_EAGAIN) {
                self->keepalive_owner = true;  // the pump repeats it before anything else
                self->eagain();
            } else if (rc != 0) {
                self->error(rc, "keepalive");
            }
        }
        self->pump();
        self->start_keepalive();
    });
}

// ------------------------------------------------------------------------------------------------
// The pump

void Session::Impl::pump() {
    if (phase != Phase::up) return;
    if (in_pump) {  // an op's callback started more work: one more pass, not a nested one
        pump_again = true;
        return;
    }
    in_pump = true;
    bool any_progress = false;
    bool budget_spent = false;
    do {
        pump_again = false;
        for (int round = 0; !dead; ++round) {
            if (round == 64) {
                budget_spent = true;  // yield to the other sessions, then go on
                break;
            }
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
                } else if (send_owner == op) {
                    send_owner = nullptr;
                }
                ++i;
            }
            any_progress |= progress;
            if (!progress) break;
        }
    } while (pump_again && !dead && !budget_spent);
    in_pump = false;
    if (!dead) {
        flush();
        if (sock_error != 0) {
            die({Failure::lost,
                 "ssh " + label + ": connection lost (send: " + std::strerror(sock_error) + ")"});
        } else if ((peer_closed || recv_error) && !any_progress) {
            // The peer closed the connection and no operation could use what was left.
            die({Failure::lost, peer_closed ? "ssh " + label + ": connection closed by the server"
                                            : "ssh " + label + ": connection lost (recv: " +
                                                  std::strerror(recv_error) + ")"});
        }
    }
    if (dead) {
        teardown();
        return;
    }
    // Still work to do, or a closed peer whose last bytes were just used: another pass soon (a
    // closed socket is not waited for; the next pass ends the session if nothing moves).
    if (budget_spent || peer_closed || recv_error) wake();
    arm(true, (round_dirs & LIBSSH2_SESSION_BLOCK_OUTBOUND) != 0 || pending_out() > 0);
}

// ------------------------------------------------------------------------------------------------
// The end

void Session::Impl::teardown() noexcept {
    if (phase == Phase::closed) return;
    post_completions = true;  // nothing of a caller's runs inside its close()
    const bool was_up = phase == Phase::up;
    phase = Phase::closed;
    connect_step = nullptr;
    const bool goodbye = !dead && !send_owner;
    die({Failure::lost, "ssh " + label + ": session closed"});
    boost::system::error_code ignored;
    keepalive_timer.cancel(ignored);
    if (s && was_up) {
        // Best effort and without waiting: say goodbye, then make every later send fail at once
        // so that freeing channels cannot wait on a peer.
        if (goodbye) libssh2_session_disconnect(s, "sky: session closed");
        if (sock.is_open()) {
            flush();
            ::shutdown(sock.native_handle(), SHUT_RDWR);
        }
        if (sock_error == 0) sock_error = EPIPE;
        libssh2_session_set_blocking(s, 1);
        libssh2_session_set_timeout(s, 1000);
        for (auto& op : ops) op->release(*this);
        if (sftp) {
            libssh2_sftp_shutdown(sftp);
            sftp = nullptr;
        }
    }
    // Each op drops its libssh2 objects without calling libssh2; session_free frees them.
    auto ending = std::move(ops);
    ops.clear();
    opener = send_owner = sftp_user = nullptr;
    for (auto& op : ending) op->abort(death);
    if (s) {
        if (sock_error == 0) sock_error = EPIPE;
        libssh2_session_set_blocking(s, 1);
        libssh2_session_set_timeout(s, 1000);
        libssh2_session_free(s);
        s = nullptr;
    }
    reset_socket_state();
}

void Session::Impl::close() noexcept {
    if (strand.running_in_this_thread() && !in_pump) {
        teardown();
        return;
    }
    auto self = shared_from_this();
    // Inside the pump (an exec callback, a completion): the pump finishes its round first. On
    // another I/O thread, waiting could block the thread the strand needs.
    if (io::on_io_thread()) {
        post([self] { self->teardown(); });
        return;
    }
    std::promise<void> done;
    auto finished = done.get_future();
    post([self, &done] {
        self->teardown();
        done.set_value();
    });
    finished.wait();
}

}  // namespace sky::detail::ssh
