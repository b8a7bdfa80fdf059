#include "runtime/auth.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "sky/errors.hpp"
#include "util/encoding.hpp"

namespace sky::detail {

AuthBlock auth_mac(std::string_view token, char tag, const AuthBlock& a, const AuthBlock& b) {
    unsigned char msg[1 + 2 * sizeof(AuthBlock)];
    msg[0] = static_cast<unsigned char>(tag);
    std::memcpy(msg + 1, a.data(), a.size());
    std::memcpy(msg + 1 + a.size(), b.data(), b.size());
    AuthBlock out{};
    unsigned int len = 0;
    if (!HMAC(EVP_sha256(), token.data(), static_cast<int>(token.size()), msg, sizeof msg,
              reinterpret_cast<unsigned char*>(out.data()), &len) ||
        len != out.size())
        throw Error("HMAC-SHA256 failed (OpenSSL)");
    return out;
}

bool auth_equal(const AuthBlock& a, const AuthBlock& b) noexcept {
    return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

namespace {

AuthBlock hmac_of(std::string_view key, std::span<const std::byte> msg) {
    AuthBlock out{};
    unsigned int len = 0;
    if (!HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
              reinterpret_cast<const unsigned char*>(msg.data()), msg.size(),
              reinterpret_cast<unsigned char*>(out.data()), &len) ||
        len != out.size())
        throw Error("HMAC-SHA256 failed (OpenSSL)");
    return out;
}

std::string_view as_text(const AuthBlock& b) {
    return {reinterpret_cast<const char*>(b.data()), b.size()};
}

// tag || the blocks, in order.
std::vector<std::byte> joined(char tag, std::initializer_list<const AuthBlock*> parts) {
    std::vector<std::byte> m;
    if (tag) m.push_back(static_cast<std::byte>(tag));
    for (auto* p : parts) m.insert(m.end(), p->begin(), p->end());
    return m;
}

EVP_PKEY* pkey(void* p) { return static_cast<EVP_PKEY*>(p); }

}  // namespace

X25519Key::X25519Key() : key_(nullptr) {
    EVP_PKEY_CTX* c = EVP_PKEY_CTX_new_id(EVP_PKEY_X25519, nullptr);
    EVP_PKEY* k = nullptr;
    const bool ok = c && EVP_PKEY_keygen_init(c) == 1 && EVP_PKEY_keygen(c, &k) == 1;
    EVP_PKEY_CTX_free(c);
    if (!ok) throw Error("OpenSSL: cannot make an X25519 key");
    key_ = k;
}

X25519Key::X25519Key(const AuthBlock& private_key)
    : key_(EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, nullptr,
                                        reinterpret_cast<const unsigned char*>(private_key.data()),
                                        private_key.size())) {
    if (!key_) throw Error("OpenSSL: not an X25519 private key");
}

X25519Key::~X25519Key() { EVP_PKEY_free(pkey(key_)); }

AuthBlock X25519Key::private_key() const {
    AuthBlock out{};
    std::size_t len = out.size();
    if (EVP_PKEY_get_raw_private_key(pkey(key_), reinterpret_cast<unsigned char*>(out.data()),
                                     &len) != 1 ||
        len != out.size())
        throw Error("OpenSSL: cannot read an X25519 private key");
    return out;
}

AuthBlock X25519Key::public_key() const {
    AuthBlock out{};
    std::size_t len = out.size();
    if (EVP_PKEY_get_raw_public_key(pkey(key_), reinterpret_cast<unsigned char*>(out.data()),
                                    &len) != 1 ||
        len != out.size())
        throw Error("OpenSSL: cannot read an X25519 public key");
    return out;
}

AuthBlock X25519Key::agree(const AuthBlock& peer) const {
    EVP_PKEY* p = EVP_PKEY_new_raw_public_key(
        EVP_PKEY_X25519, nullptr, reinterpret_cast<const unsigned char*>(peer.data()), peer.size());
    if (!p) throw ProtocolError("authentication failed: the peer's X25519 key is malformed");
    EVP_PKEY_CTX* c = EVP_PKEY_CTX_new(pkey(key_), nullptr);
    AuthBlock out{};
    std::size_t len = out.size();
    const bool ok = c && EVP_PKEY_derive_init(c) == 1 && EVP_PKEY_derive_set_peer(c, p) == 1 &&
                    EVP_PKEY_derive(c, reinterpret_cast<unsigned char*>(out.data()), &len) == 1 &&
                    len == out.size();
    EVP_PKEY_CTX_free(c);
    EVP_PKEY_free(p);
    const AuthBlock zero{};
    // OpenSSL refuses a low-order point (an all-zero secret); checked again, cheaply.
    if (!ok || auth_equal(out, zero))
        throw ProtocolError("authentication failed: the peer's X25519 key gives no secret");
    return out;
}

AuthBlock hkdf_sha256(std::string_view salt, std::span<const std::byte> ikm,
                      std::span<const std::byte> info) {
    const AuthBlock prk = hmac_of(salt, ikm);
    std::vector<std::byte> m(info.begin(), info.end());
    m.push_back(std::byte{1});
    AuthBlock out = hmac_of(as_text(prk), m);
    OPENSSL_cleanse(const_cast<std::byte*>(prk.data()), prk.size());
    return out;
}

std::string agreed_token(const X25519Key& mine, const AuthBlock& peer) {
    AuthBlock shared = mine.agree(peer);
    static constexpr char info[] = "sky token v1";
    const AuthBlock t = hkdf_sha256("sky", shared, std::as_bytes(std::span(info, sizeof info - 1)));
    OPENSSL_cleanse(shared.data(), shared.size());
    return hex_encode(as_text(t));
}

std::string public_key_text(const AuthBlock& key) { return "x25519:" + hex_encode(as_text(key)); }

std::optional<AuthBlock> parse_public_key(std::string_view text) {
    constexpr std::string_view prefix = "x25519:";
    if (text.substr(0, prefix.size()) != prefix || text.size() != prefix.size() + 64)
        return std::nullopt;
    AuthBlock out{};
    auto digit = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        return -1;
    };
    for (std::size_t i = 0; i < out.size(); ++i) {
        const int hi = digit(text[prefix.size() + 2 * i]),
                  lo = digit(text[prefix.size() + 2 * i + 1]);
        if (hi < 0 || lo < 0) return std::nullopt;
        out[i] = static_cast<std::byte>(hi * 16 + lo);
    }
    return out;
}

namespace {

// The stream's keys of one end (`client`: the client's), from the ephemeral secret and the
// transcript Nw || Ew || Nc || Ec, salted with the token.
io::SealKeys stream_keys(std::string_view token, AuthBlock shared,
                         std::span<const std::byte> transcript, bool client) {
    auto key = [&](std::string_view label) {
        std::vector<std::byte> info(
            reinterpret_cast<const std::byte*>(label.data()),
            reinterpret_cast<const std::byte*>(label.data()) + label.size());
        info.insert(info.end(), transcript.begin(), transcript.end());
        return hkdf_sha256(token, shared, info);
    };
    const AuthBlock c2w = key("sky c2w v1"), w2c = key("sky w2c v1");
    OPENSSL_cleanse(shared.data(), shared.size());
    io::SealKeys k;
    k.seal = client ? c2w : w2c;
    k.open = client ? w2c : c2w;
    return k;
}

}  // namespace

namespace {

// One auth frame: the header and `parts` concatenated.
Buffer auth_frame(std::initializer_list<const AuthBlock*> parts) {
    Buffer f;
    f.resize(frame_header_size);
    encode_header(f.data(), MsgType::auth, 0, parts.size() * sizeof(AuthBlock));
    for (auto* p : parts) f.append(p->data(), p->size());
    return f;
}

[[noreturn]] void auth_failed(const std::string& why) {
    throw ProtocolError("authentication failed: " + why);
}

}  // namespace

AuthBlock worker_auth_block(const Frame& f, const char* what) {
    if (f.header.type != MsgType::auth || f.payload.size() != sizeof(AuthBlock))
        auth_failed(fmt::format("expected the worker's {} ({} bytes), got a {} frame of {} bytes",
                                what, sizeof(AuthBlock), msg_type_name(f.header.type),
                                f.payload.size()));
    AuthBlock out{};
    std::memcpy(out.data(), f.payload.data(), out.size());
    return out;
}

ClientAuthAnswer client_auth_answer(std::string_view token, const AuthBlock& nw) {
    AuthBlock nc{};
    random_bytes(nc);
    const AuthBlock mine = auth_mac(token, 'c', nw, nc);
    return {auth_frame({&nc, &mine}), auth_mac(token, 'w', nc, nw)};
}

ClientAuthAnswer client_auth_answer(std::string_view token, const Frame& challenge,
                                    bool need_seal) {
    if (challenge.header.type == MsgType::auth && (challenge.header.flags & auth_flag_seal) &&
        challenge.payload.size() == 2 * sizeof(AuthBlock)) {
        AuthBlock nw{}, ew{}, nc{};
        std::memcpy(nw.data(), challenge.payload.data(), nw.size());
        std::memcpy(ew.data(), challenge.payload.data() + nw.size(), ew.size());
        random_bytes(nc);
        const X25519Key e;
        const AuthBlock ec = e.public_key();
        const AuthBlock shared = e.agree(ew);
        const auto transcript = joined(0, {&nw, &ew, &nc, &ec});
        const AuthBlock mine = hmac_of(token, joined('C', {&nw, &ew, &nc, &ec}));
        ClientAuthAnswer a;
        a.frame.resize(frame_header_size);
        encode_header(a.frame.data(), MsgType::auth, 0, auth_sealed_answer, auth_flag_seal);
        for (const AuthBlock* p : std::initializer_list<const AuthBlock*>{&nc, &ec, &mine})
            a.frame.append(p->data(), p->size());
        a.expected_proof = hmac_of(token, joined('W', {&nc, &ec, &nw, &ew}));
        a.keys = stream_keys(token, shared, transcript, true);
        return a;
    }
    if (need_seal && challenge.header.type == MsgType::auth)
        auth_failed(
            "the worker does not encrypt its stream (a plain challenge), and this connection "
            "crosses a network sky does not otherwise encrypt");
    return client_auth_answer(token, worker_auth_block(challenge, "challenge"));
}

void check_worker_proof(const ClientAuthAnswer& answer, const AuthBlock& proof) {
    if (!auth_equal(proof, answer.expected_proof))
        auth_failed("the worker's proof does not match this pool's token (not our worker)");
}

void client_authenticate(Transport& t, FrameReader& reader, std::string_view token,
                         std::chrono::milliseconds timeout) {
    (void)client_authenticate(t, reader, token, timeout, false);
}

std::optional<io::SealKeys> client_authenticate(Transport& t, FrameReader& reader,
                                                std::string_view token,
                                                std::chrono::milliseconds timeout, bool need_seal) {
    auto read_frame = [&](const char* what) {
        if (!reader.has_buffered_frame() && !t.wait_readable(timeout))
            throw Error(
                fmt::format("no {} from the worker within {} s", what,
                            std::chrono::duration_cast<std::chrono::seconds>(timeout).count()));
        Frame f;
        bool got = false;
        try {
            got = reader.next(f);
        } catch (const ProtocolError& e) {
            auth_failed(fmt::format("bad {} from the peer: {}", what, e.what()));
        }
        if (!got) throw Error(fmt::format("the worker closed the connection before its {}", what));
        return f;
    };
    const ClientAuthAnswer answer = client_auth_answer(token, read_frame("challenge"), need_seal);
    std::span<const std::byte> one[] = {answer.frame.span()};
    t.write_all(one);
    check_worker_proof(answer, worker_auth_block(read_frame("proof"), "proof"));
    return answer.keys;
}

namespace {

// A peer on its way through the handshake: the challenge is sent, its answer is being read.
struct Pending {
    int fd = -1;
    AuthBlock nw{};
    std::shared_ptr<X25519Key> e;  // a sealing worker's ephemeral key for this peer
    std::array<std::byte, frame_header_size + auth_sealed_answer> in{};
    std::size_t have = 0;
    std::chrono::steady_clock::time_point until;
    std::chrono::steady_clock::time_point since;  // accepted at (the oldest silent goes first)
    std::string source;                           // the peer's IP address ("" off the network)
};

// The IP address of an accepted TCP peer ("" for a Unix socket's).
std::string peer_address(const sockaddr_storage& a) {
    char text[INET6_ADDRSTRLEN] = {};
    if (a.ss_family == AF_INET)
        ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(a).sin_addr, text, sizeof text);
    else if (a.ss_family == AF_INET6)
        ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(a).sin6_addr, text,
                    sizeof text);
    return text;
}

// Whether the peer has sent bytes not read yet: it has spoken, even if this round has not
// read it (a newcomer accepted in the same round must not push it out).
bool has_unread(int fd) {
    int n = 0;
    return ::ioctl(fd, FIONREAD, &n) == 0 && n > 0;
}

bool send_all(int fd, const Buffer& b) {
    std::size_t off = 0;
    while (off < b.size()) {
        ssize_t n = ::send(fd, b.data() + off, b.size() - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        off += static_cast<std::size_t>(n);
    }
    return true;
}

void set_blocking(int fd, bool blocking) {
    int fl = ::fcntl(fd, F_GETFL);
    if (fl >= 0) ::fcntl(fd, F_SETFL, blocking ? (fl & ~O_NONBLOCK) : (fl | O_NONBLOCK));
}

// Sends a fresh challenge (sealing: with a fresh ephemeral key); false when the peer is
// already gone.
bool start(Pending& p, std::chrono::milliseconds per_peer, bool seal) {
    random_bytes(p.nw);
    p.until = std::chrono::steady_clock::now() + per_peer;
    Buffer challenge;
    if (seal) {
        p.e = std::make_shared<X25519Key>();
        const AuthBlock ew = p.e->public_key();
        challenge = auth_frame({&p.nw, &ew});
        FrameHeader h = decode_header(challenge.data(), auth_max_frame);
        encode_header(challenge.data(), MsgType::auth, 0, h.length, auth_flag_seal);
    } else {
        challenge = auth_frame({&p.nw});
    }
    // The challenge is at most 88 bytes on a fresh socket: it fits in the send buffer, so a
    // blocking write cannot stall here; the socket is made non-blocking for the reads that
    // follow.
    set_blocking(p.fd, true);
    bool ok = send_all(p.fd, challenge);
    set_blocking(p.fd, false);
    return ok;
}

enum class Step { more, done, failed };

// Reads what the peer sent (never more than its answer, so nothing after it is consumed) and
// checks it once complete; a sealing worker's `keys` get the stream's keys.
Step advance(Pending& p, std::string_view token, std::string& why,
             std::optional<io::SealKeys>* keys) {
    const bool seal = p.e != nullptr;
    const std::size_t answer = seal ? auth_sealed_answer : auth_max_frame;
    const std::size_t whole = frame_header_size + answer;
    for (;;) {
        ssize_t n = ::recv(p.fd, p.in.data() + p.have, whole - p.have, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Step::more;
        if (n <= 0) {
            why = n == 0 ? "it closed the connection" : std::strerror(errno);
            return Step::failed;
        }
        p.have += static_cast<std::size_t>(n);
        if (p.have >= frame_header_size) {
            try {
                FrameHeader h = decode_header(p.in.data(), auth_sealed_answer);
                if (h.type == MsgType::auth && seal != ((h.flags & auth_flag_seal) != 0))
                    throw ProtocolError(seal ? "a plain answer: this worker seals its stream"
                                             : "a sealed answer to a plain challenge");
                if (h.type != MsgType::auth || h.length != answer)
                    throw ProtocolError(fmt::format("a {} frame of {} bytes instead of the answer",
                                                    msg_type_name(h.type), h.length));
            } catch (const std::exception& e) {
                why = e.what();
                return Step::failed;
            }
        }
        if (p.have < whole) continue;
        AuthBlock nc{}, ec{}, mac{};
        const std::byte* at = p.in.data() + frame_header_size;
        std::memcpy(nc.data(), at, nc.size());
        if (seal) std::memcpy(ec.data(), at + nc.size(), ec.size());
        std::memcpy(mac.data(), at + answer - mac.size(), mac.size());
        AuthBlock proof{};
        if (seal) {
            const AuthBlock ew = p.e->public_key();
            if (!auth_equal(mac, hmac_of(token, joined('C', {&p.nw, &ew, &nc, &ec})))) {
                why = "wrong HMAC (the peer does not hold the pool token)";
                return Step::failed;
            }
            try {
                *keys =
                    stream_keys(token, p.e->agree(ec), joined(0, {&p.nw, &ew, &nc, &ec}), false);
            } catch (const std::exception& e) {
                why = e.what();
                return Step::failed;
            }
            proof = hmac_of(token, joined('W', {&nc, &ec, &p.nw, &ew}));
        } else {
            if (!auth_equal(mac, auth_mac(token, 'c', p.nw, nc))) {
                why = "wrong HMAC (the peer does not hold the pool token)";
                return Step::failed;
            }
            proof = auth_mac(token, 'w', nc, p.nw);
        }
        set_blocking(p.fd, true);
        if (!send_all(p.fd, auth_frame({&proof}))) {
            why = "it closed the connection before the worker's proof";
            return Step::failed;
        }
        return Step::done;
    }
}

}  // namespace

int worker_authenticate(int listen_fd, int fd, std::string_view token,
                        std::chrono::steady_clock::time_point deadline,
                        std::chrono::milliseconds per_peer,
                        const std::function<void(const std::string&)>& note) {
    return worker_authenticate(listen_fd, fd, token, deadline, per_peer, note, {});
}

int worker_authenticate(int listen_fd, int fd, std::string_view token,
                        std::chrono::steady_clock::time_point deadline,
                        std::chrono::milliseconds per_peer,
                        const std::function<void(const std::string&)>& note,
                        std::string_view allow_from) {
    return worker_authenticate(listen_fd, fd, token, deadline, per_peer, note, allow_from, nullptr);
}

int worker_authenticate(int listen_fd, int fd, std::string_view token,
                        std::chrono::steady_clock::time_point deadline,
                        std::chrono::milliseconds per_peer,
                        const std::function<void(const std::string&)>& note,
                        std::string_view allow_from, std::optional<io::SealKeys>* keys,
                        int wake_fd) {
    using Clock = std::chrono::steady_clock;
    const bool seal = keys != nullptr;
    // Bounded so that a flood of connections costs a fixed amount of memory and descriptors.
    // A peer that has sent bytes of its answer is never dropped for a newcomer (it may be the
    // client half-way through); a silent one may be, but only for a newcomer from its own
    // address once that address has auth_pending_per_source peers waiting, or for any
    // newcomer once the table is full and that address holds the most: silent connections
    // from one address cannot push out a client from another. When nothing may make room,
    // the newcomer is refused.
    constexpr std::size_t max_pending = auth_max_pending;
    std::vector<Pending> pending;
    auto drop = [&](std::size_t i, const std::string& why) {
        note(fmt::format("dropped a connection{} that failed authentication: {}",
                         pending[i].source.empty() ? "" : " from " + pending[i].source, why));
        ::close(pending[i].fd);
        pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
    };
    auto close_all = [&] {
        for (auto& p : pending) ::close(p.fd);
        pending.clear();
    };
    // The oldest silent peer from `source` ("*": from the address with the most peers waiting);
    // pending.size() when there is none.
    auto oldest_silent = [&](const std::string& source) {
        std::string from = source;
        if (from == "*") {
            std::map<std::string, std::size_t> count;
            std::size_t most = 0;
            for (const auto& p : pending)
                if (p.have == 0 && !has_unread(p.fd) && ++count[p.source] > most) {
                    most = count[p.source];
                    from = p.source;
                }
        }
        std::size_t best = pending.size();
        for (std::size_t i = 0; i < pending.size(); ++i)
            if (pending[i].have == 0 && !has_unread(pending[i].fd) && pending[i].source == from &&
                (best == pending.size() || pending[i].since < pending[best].since))
                best = i;
        return best;
    };
    if (listen_fd < 0) {
        pending.push_back({});
        pending.back().fd = fd;
        if (!start(pending.back(), per_peer, seal)) {
            note("the client closed the connection before the challenge");
            close_all();
            return -1;
        }
    } else {
        set_blocking(listen_fd, false);
    }
    for (;;) {
        auto now = Clock::now();
        if (now >= deadline) {
            close_all();
            return -1;
        }
        for (std::size_t i = 0; i < pending.size();)
            if (now >= pending[i].until)
                drop(i, "it did not answer the challenge in time");
            else
                ++i;
        if (listen_fd < 0 && pending.empty()) return -1;
        auto wake = deadline;
        for (auto& p : pending) wake = std::min(wake, p.until);
        std::vector<pollfd> fds;
        if (listen_fd >= 0) fds.push_back({listen_fd, POLLIN, 0});
        for (auto& p : pending) fds.push_back({p.fd, POLLIN, 0});
        if (wake_fd >= 0) fds.push_back({wake_fd, POLLIN, 0});
        auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count() + 1;
        // Never negative: poll would wait forever.
        int r =
            ::poll(fds.data(), fds.size(), static_cast<int>(std::clamp<long long>(ms, 0, 60000)));
        if (r < 0 && errno != EINTR) {
            note(fmt::format("poll failed: {}", std::strerror(errno)));
            close_all();
            return -1;
        }
        if (r <= 0) continue;
        if (wake_fd >= 0 && (fds.back().revents & POLLIN)) {
            close_all();
            return -1;
        }
        if (wake_fd >= 0) fds.pop_back();
        std::size_t first = 0;
        if (listen_fd >= 0) {
            first = 1;
            // Every connection waiting in the backlog, not one a round: a flood must not fill
            // the backlog while the client's connection waits behind it.
            for (int k = 0; (fds[0].revents & POLLIN) && k < 64; ++k) {
                sockaddr_storage addr{};
                socklen_t len = sizeof addr;
                int c =
                    ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_CLOEXEC);
                if (c < 0) break;
                Pending p;
                p.fd = c;
                p.since = Clock::now();
                p.source = peer_address(addr);
                if (!allow_from.empty() && p.source != allow_from) {
                    note(fmt::format("refused a connection from {}: only {} may connect",
                                     p.source.empty() ? "an unknown address" : p.source,
                                     allow_from));
                    ::close(c);
                    continue;
                }
                std::size_t same = 0;
                for (const auto& q : pending) same += q.source == p.source;
                std::size_t room = pending.size();
                if (!p.source.empty() && same >= auth_pending_per_source) {
                    room = oldest_silent(p.source);
                    if (room == pending.size()) {
                        note(
                            fmt::format("refused a connection from {}: {} connections from there "
                                        "are in the handshake",
                                        p.source, same));
                        ::close(c);
                        continue;
                    }
                } else if (pending.size() >= max_pending) {
                    room = oldest_silent("*");
                    if (room == pending.size()) {
                        note("refused a connection: too many connections in the handshake");
                        ::close(c);
                        continue;
                    }
                }
                if (room != pending.size()) drop(room, "too many connections at once");
                if (start(p, per_peer, seal)) {
                    pending.push_back(p);
                } else {
                    note("dropped a connection that closed before the challenge");
                    ::close(c);
                }
            }
        }
        // Newly accepted peers are not in `fds`: they are looked at on the next round.
        for (std::size_t k = first; k < fds.size(); ++k) {
            if (!(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            std::size_t i = 0;
            while (i < pending.size() && pending[i].fd != fds[k].fd) ++i;
            if (i == pending.size()) continue;  // dropped in this round
            std::string why;
            switch (advance(pending[i], token, why, keys)) {
                case Step::more:
                    break;
                case Step::failed:
                    drop(i, why);
                    break;
                case Step::done: {
                    int ok = pending[i].fd;
                    pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
                    close_all();
                    return ok;
                }
            }
        }
    }
}

}  // namespace sky::detail
