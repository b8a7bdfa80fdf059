// Session and authentication: TCP connect, SSH handshake, host-key pinning and public-key
// authentication, each attempt bounded by connect_timeout and retried with a growing pause, all
// on the session's strand with libssh2 in non-blocking mode.
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <cerrno>
#include <cstring>
#include <optional>

#include "io/io_core.hpp"
#include "ssh/host_key.hpp"
#include "ssh/session_impl.hpp"

namespace sky::detail::ssh {

namespace {

using std::chrono::milliseconds;

void global_init() {
    // libssh2_init is not thread-safe; run it once. libssh2_exit is never called: static
    // destruction order would make it race sessions still closing.
    static std::once_flag once;
    std::call_once(once, [] {
        if (libssh2_init(0) != 0) throw SshError("libssh2 initialisation failed");
    });
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

struct Address {
    sockaddr_storage addr{};
    socklen_t len = 0;
    int family = AF_UNSPEC;
};

// getaddrinfo; 0 or its error code. AI_NUMERICHOST answers at once or says EAI_NONAME.
int resolve(const std::string& host, std::uint16_t port, bool numeric_only,
            std::vector<Address>* out) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV | (numeric_only ? AI_NUMERICHOST : 0);
    addrinfo* res = nullptr;
    const std::string service = std::to_string(port);
    int gai = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res);
    if (gai != 0) return gai;
    for (addrinfo* ai = res; ai; ai = ai->ai_next) {
        Address a;
        std::memcpy(&a.addr, ai->ai_addr, std::min<std::size_t>(ai->ai_addrlen, sizeof a.addr));
        a.len = ai->ai_addrlen;
        a.family = ai->ai_family;
        out->push_back(a);
    }
    ::freeaddrinfo(res);
    return 0;
}

// What a connect needs beyond the options, worked out before the first packet (files read,
// pins checked): errors here are the caller's, never retried.
struct Plan {
    std::vector<std::string> expected;  // accepted host key fingerprints
    std::string hostkey_pref;
    std::string pubkey_file;
};

Plan plan_connect(const SessionOptions& o, const std::string& label) {
    if (o.private_key_file.empty() && o.private_key.empty()) {
        throw AuthenticationError("ssh " + label + ": no private key given");
    }
    std::vector<ParsedKey> known;
    if (!o.host_key.known_hosts_file.empty()) {
        known = known_hosts_entries(o.host_key.known_hosts_file, o.host, o.port);
    }
    if (!o.host_key.accept_any && o.host_key.fingerprints.empty() &&
        o.host_key.known_hosts_file.empty()) {
        throw SshError("ssh " + label +
                       ": no host key pinned (give a fingerprint, a public key or a known_hosts "
                       "file; trust on first use needs HostKeyPin::insecure_accept_any())");
    }
    Plan p;
    p.expected = o.host_key.fingerprints;
    for (const auto& k : known) p.expected.push_back(k.fingerprint);
    if (!o.private_key_file.empty()) {
        auto pub = o.private_key_file.string() + ".pub";
        if (::access(pub.c_str(), R_OK) == 0) p.pubkey_file = pub;
        if (::access(o.private_key_file.c_str(), R_OK) != 0) {
            throw AuthenticationError("ssh " + label + ": cannot read private key file " +
                                      o.private_key_file.string());
        }
    }
    // Host key algorithms: the pinned types first, so the server shows the key we know.
    for (const auto& k : known) {
        if (p.hostkey_pref.find(k.type) == std::string::npos) p.hostkey_pref += k.type + ",";
    }
    p.hostkey_pref +=
        "ssh-ed25519,ecdsa-sha2-nistp256,ecdsa-sha2-nistp384,ecdsa-sha2-nistp521,rsa-sha2-512,"
        "rsa-sha2-256,ssh-rsa";
    return p;
}

// One connect: attempts of resolve, TCP connect, handshake, host key check and authentication,
// each bounded by connect_timeout, with a pause (doubling, at most 5 s) between attempts. Runs
// on the session's strand; `done` gets nullptr once the session is up, or the error.
class Connector : public std::enable_shared_from_this<Connector> {
public:
    using Done = std::function<void(std::exception_ptr)>;

    Connector(std::shared_ptr<Session::Impl> im, Plan plan, Done done)
        : im_(std::move(im)),
          plan_(std::move(plan)),
          done_(std::move(done)),
          deadline_(im_->strand),
          pause_(im_->strand),
          attempts_(std::max(1, im_->opts.connect_attempts)),
          delay_(im_->opts.retry_delay) {}

    void start() { begin_attempt(); }

private:
    struct Failed {
        enum Kind { network, timeout, auth } kind;
        std::string message;
    };
    enum class Phase { resolving, tcp, handshake, auth, finished } phase_ = Phase::resolving;

    std::shared_ptr<Session::Impl> im_;
    Plan plan_;
    Done done_;
    boost::asio::steady_timer deadline_;
    boost::asio::steady_timer pause_;
    int attempts_;
    int attempt_ = 0;
    milliseconds delay_;
    unsigned gen_ = 0;  // handlers of an earlier attempt change nothing
    std::vector<Address> addrs_;
    std::size_t next_addr_ = 0;
    std::string tcp_error_;
    std::optional<Failed> last_;
    std::string actual_;  // the presented host key's fingerprint

    const SessionOptions& opts() const { return im_->opts; }

    void begin_attempt() {
        ++attempt_;
        ++gen_;
        phase_ = Phase::resolving;
        deadline_.expires_after(opts().connect_timeout);
        deadline_.async_wait([self = shared_from_this(), gen = gen_](boost::system::error_code ec) {
            if (!ec && gen == self->gen_) self->expired();
        });
        std::vector<Address> found;
        int gai = resolve(opts().host, opts().port, true, &found);
        if (gai == 0) {
            addrs_ = std::move(found);
            connect_next();
            return;
        }
        if (gai != EAI_NONAME) {
            fail_attempt({Failed::network, std::string("cannot resolve: ") + ::gai_strerror(gai)});
            return;
        }
        // A name: the resolver may block, so it runs on the pool for blocking work.
        boost::asio::post(io::blocking(), [self = shared_from_this(), gen = gen_,
                                           host = opts().host, port = opts().port] {
            std::vector<Address> addrs;
            int rc = resolve(host, port, false, &addrs);
            self->im_->post([self, gen, rc, addrs = std::move(addrs)]() mutable {
                if (gen != self->gen_ || self->phase_ != Phase::resolving) return;
                if (rc != 0) {
                    self->fail_attempt(
                        {Failed::network, std::string("cannot resolve: ") + ::gai_strerror(rc)});
                    return;
                }
                self->addrs_ = std::move(addrs);
                self->connect_next();
            });
        });
    }

    void connect_next() {
        phase_ = Phase::tcp;
        while (next_addr_ < addrs_.size()) {
            const Address& a = addrs_[next_addr_++];
            int fd = ::socket(a.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
            if (fd < 0) {
                tcp_error_ = std::string("socket: ") + std::strerror(errno);
                continue;
            }
            im_->reset_socket_state();
            boost::system::error_code ec;
            im_->sock.assign(fd, ec);
            if (ec) {
                ::close(fd);
                tcp_error_ = "socket: " + ec.message();
                continue;
            }
            if (::connect(fd, reinterpret_cast<const sockaddr*>(&a.addr), a.len) == 0) {
                connected();
                return;
            }
            if (errno == EINPROGRESS) {
                im_->connect_step = [self = shared_from_this(), gen = gen_] {
                    if (gen == self->gen_) self->tcp_ready();
                };
                im_->arm(false, true);
                return;
            }
            tcp_error_ = std::string("connect: ") + std::strerror(errno);
            im_->reset_socket_state();
        }
        fail_attempt({Failed::network, tcp_error_.empty() ? "no address" : tcp_error_});
    }

    void tcp_ready() {
        int soerr = 0;
        socklen_t len = sizeof soerr;
        ::getsockopt(im_->sock.native_handle(), SOL_SOCKET, SO_ERROR, &soerr, &len);
        if (soerr == 0) {
            connected();
            return;
        }
        tcp_error_ = std::string("connect: ") + std::strerror(soerr);
        im_->reset_socket_state();
        connect_next();
    }

    void connected() {
        tune_socket(im_->sock.native_handle(), opts().keepalive_interval);
        LIBSSH2_SESSION* s = libssh2_session_init_ex(nullptr, nullptr, nullptr, im_.get());
        if (!s) {
            fatal(std::make_exception_ptr(
                SshError("ssh " + im_->label + ": cannot allocate a libssh2 session")));
            return;
        }
        im_->s = s;
        libssh2_session_set_blocking(s, 0);
        libssh2_session_callback_set(s, LIBSSH2_CALLBACK_SEND,
                                     reinterpret_cast<void*>(&Session::Impl::send_cb));
        libssh2_session_callback_set(s, LIBSSH2_CALLBACK_RECV,
                                     reinterpret_cast<void*>(&Session::Impl::recv_cb));
        // AES-CTR runs on AES-NI; libssh2 1.10 has no AES-GCM, chacha20 or ETM MACs.
        const std::string ciphers = opts().ciphers.empty() ? kDefaultCiphers : opts().ciphers;
        const std::string macs = opts().macs.empty() ? kDefaultMacs : opts().macs;
        struct Pref {
            int method;
            const char* what;
            std::string asked;
            std::string methods = {};
        };
        Pref prefs[] = {
            {LIBSSH2_METHOD_HOSTKEY, "host key algorithms", plan_.hostkey_pref},
            {LIBSSH2_METHOD_CRYPT_CS, "ciphers", ciphers},
            {LIBSSH2_METHOD_CRYPT_SC, "ciphers", ciphers},
            {LIBSSH2_METHOD_MAC_CS, "MACs", macs},
            {LIBSSH2_METHOD_MAC_SC, "MACs", macs},
        };
        for (auto& p : prefs) {
            p.methods = supported_methods(s, p.method, p.asked);
            if (!p.methods.empty()) continue;
            fatal(std::make_exception_ptr(SshError(
                "ssh " + im_->label + ": none of the " + p.what + " '" + p.asked +
                "' is supported by the linked libssh2 (it supports: " + joined(s, p.method) +
                ")")));
            return;
        }
        for (const auto& p : prefs) libssh2_session_method_pref(s, p.method, p.methods.c_str());
        phase_ = Phase::handshake;
        step();
    }

    // After a libssh2 call: sends what it wrote; on EAGAIN waits for the socket as libssh2
    // asks. False when the connector must wait or the attempt failed.
    bool settle(int rc) {
        im_->flush();
        if (im_->sock_error) {
            fail_attempt({Failed::network, std::string("send: ") + std::strerror(im_->sock_error)});
            return false;
        }
        if (rc != LIBSSH2_ERROR_EAGAIN) return true;
        const int dirs = libssh2_session_block_directions(im_->s);
        im_->connect_step = [self = shared_from_this(), gen = gen_] {
            if (gen == self->gen_) self->step();
        };
        im_->arm((dirs & LIBSSH2_SESSION_BLOCK_INBOUND) || !(dirs & LIBSSH2_SESSION_BLOCK_OUTBOUND),
                 (dirs & LIBSSH2_SESSION_BLOCK_OUTBOUND) || im_->pending_out() > 0);
        return false;
    }

    void step() {
        LIBSSH2_SESSION* s = im_->s;
        if (phase_ == Phase::handshake) {
            int rc = libssh2_session_handshake(s, im_->sock.native_handle());
            if (!settle(rc)) return;
            if (rc != 0) {
                fail_attempt({Failed::network, "handshake: " + session_error(s)});
                return;
            }
            if (!host_key_accepted()) return;
            phase_ = Phase::auth;
        }
        if (phase_ == Phase::auth) {
            const auto& o = opts();
            int rc = 0;
            if (!o.private_key.empty()) {
                rc = libssh2_userauth_publickey_frommemory(
                    s, o.user.data(), o.user.size(), nullptr, 0, o.private_key.data(),
                    o.private_key.size(), o.passphrase.empty() ? nullptr : o.passphrase.c_str());
            } else {
                rc = libssh2_userauth_publickey_fromfile_ex(
                    s, o.user.data(), static_cast<unsigned>(o.user.size()),
                    plan_.pubkey_file.empty() ? nullptr : plan_.pubkey_file.c_str(),
                    o.private_key_file.c_str(),
                    o.passphrase.empty() ? nullptr : o.passphrase.c_str());
            }
            if (!settle(rc)) return;
            if (rc != 0) {
                fail_attempt(
                    {Failed::auth, "public key authentication failed: " + session_error(s)});
                return;
            }
            up();
        }
    }

    // The pinned key, checked before authenticating; a mismatch is never retried.
    bool host_key_accepted() {
        std::size_t key_len = 0;
        int key_type = 0;
        const char* key = libssh2_session_hostkey(im_->s, &key_len, &key_type);
        if (!key || key_len == 0) {
            fail_attempt({Failed::network, "server sent no host key"});
            return false;
        }
        actual_ = fingerprint_of_blob({key, key_len});
        const auto& pin = opts().host_key;
        if (pin.accept_any || std::find(plan_.expected.begin(), plan_.expected.end(), actual_) !=
                                  plan_.expected.end()) {
            return true;
        }
        libssh2_session_disconnect(im_->s, "host key mismatch");
        im_->flush();
        bool revoked = false;
        if (!pin.known_hosts_file.empty()) {
            auto r = known_hosts_revoked(pin.known_hosts_file);
            revoked = std::find(r.begin(), r.end(), actual_) != r.end();
        }
        fatal(std::make_exception_ptr(HostKeyMismatch(
            opts().host + ":" + std::to_string(opts().port), plan_.expected, actual_, revoked)));
        return false;
    }

    void expired() {
        switch (phase_) {
            case Phase::resolving:
                fail_attempt({Failed::timeout, "cannot resolve: timed out"});
                break;
            case Phase::tcp:
                fail_attempt({Failed::timeout, "connect timed out"});
                break;
            case Phase::handshake:
                fail_attempt({Failed::timeout, "handshake: timed out"});
                break;
            case Phase::auth:
                fail_attempt({Failed::timeout, "public key authentication failed: timed out"});
                break;
            case Phase::finished:
                break;
        }
    }

    // Frees what this attempt made: the libssh2 session and the socket.
    void drop_attempt() {
        ++gen_;
        boost::system::error_code ignored;
        deadline_.cancel(ignored);
        im_->connect_step = nullptr;
        if (im_->s) {
            im_->sock_error = EPIPE;  // freeing sends nothing and waits for nothing
            libssh2_session_set_blocking(im_->s, 1);
            libssh2_session_free(im_->s);
            im_->s = nullptr;
        }
        im_->reset_socket_state();
        addrs_.clear();
        next_addr_ = 0;
        tcp_error_.clear();
    }

    void fail_attempt(Failed f) {
        drop_attempt();
        const bool again =
            attempt_ < attempts_ && (f.kind != Failed::auth || opts().retry_auth_failure);
        last_ = std::move(f);
        if (!again) {
            const std::string msg = "ssh " + im_->label + ": " + last_->message + " (attempt" +
                                    (attempts_ > 1 ? "s: " : ": ") + std::to_string(attempts_) +
                                    ")";
            if (last_->kind == Failed::auth) {
                finish(std::make_exception_ptr(AuthenticationError(msg)));
            } else {
                finish(std::make_exception_ptr(ConnectError(msg, last_->kind == Failed::timeout)));
            }
            return;
        }
        pause_.expires_after(delay_);
        delay_ = std::min<milliseconds>(delay_ * 2, milliseconds(5000));
        pause_.async_wait([self = shared_from_this(), gen = gen_](boost::system::error_code ec) {
            if (!ec && gen == self->gen_) self->begin_attempt();
        });
    }

    void fatal(std::exception_ptr e) {
        drop_attempt();
        finish(std::move(e));
    }

    void up() {
        ++gen_;
        boost::system::error_code ignored;
        deadline_.cancel(ignored);
        im_->connect_step = nullptr;
        libssh2_keepalive_config(
            im_->s, 1, static_cast<unsigned>(std::max<long>(opts().keepalive_interval.count(), 0)));
        im_->fingerprint = actual_;
        im_->phase = Session::Impl::Phase::up;
        im_->start_keepalive();
        // From now on the strand watches the socket, also to notice a peer that goes away.
        im_->arm(true, im_->pending_out() > 0);
        finish(nullptr);
    }

    void finish(std::exception_ptr e) {
        phase_ = Phase::finished;
        if (e) im_->teardown();
        auto done = std::move(done_);
        done_ = nullptr;
        if (done) done(std::move(e));
    }
};

// Starts a connect on a new session's strand; `done` runs there. Throws what the options alone
// show to be wrong (no key, no pin, an unreadable key file).
void start_connect(SessionOptions options,
                   std::function<void(std::exception_ptr, std::shared_ptr<Session::Impl>)> done) {
    global_init();
    auto im = std::make_shared<Session::Impl>(std::move(options));
    im->label = im->opts.user + "@" + im->opts.host + ":" + std::to_string(im->opts.port);
    Plan plan = plan_connect(im->opts, im->label);
    auto connector = std::make_shared<Connector>(
        im, std::move(plan),
        [im, done = std::move(done)](std::exception_ptr e) { done(e, e ? nullptr : im); });
    im->post([connector] { connector->start(); });
}

}  // namespace

Session::Session(SessionOptions options) {
    Waiter<std::shared_ptr<Impl>> wait("ssh::Session (connect)");
    start_connect(std::move(options), [&wait](std::exception_ptr e, std::shared_ptr<Impl> im) {
        if (e) {
            wait.fail(std::move(e));
        } else {
            wait.set(std::move(im));
        }
    });
    impl_ = wait.get();
}

void Session::async_connect(SessionOptions options, ConnectHandler handler) {
    auto h = std::make_shared<ConnectHandler>(std::move(handler));
    const Strand fallback = boost::asio::make_strand(io::executor());
    try {
        start_connect(std::move(options), [h, fallback](std::exception_ptr e,
                                                        std::shared_ptr<Impl> im) {
            complete_later(im ? im->strand : fallback, std::move(*h), e, Session(std::move(im)));
        });
    } catch (...) {
        complete_later(fallback, std::move(*h), std::current_exception(), Session(nullptr));
    }
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

bool Session::alive() const { return impl_ && !impl_->dead; }

const std::string& Session::host_key_fingerprint() const { return impl_->fingerprint; }

std::string Session::describe() const { return "ssh " + impl_->label; }

}  // namespace sky::detail::ssh
