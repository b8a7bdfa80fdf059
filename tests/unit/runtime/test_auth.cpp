// The handshake (mutual challenge-response over a socketpair, both sides the real code), the
// randomness behind secrets, and bounded decoding of everything a peer sends.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
// cereal writes the reference bytes of the last case (sky's archives read its format).
#include <cereal/archives/binary.hpp>
#include <cereal/types/array.hpp>
#include <cereal/types/deque.hpp>
#include <cereal/types/memory.hpp>
#include <cereal/types/string.hpp>
#include <cereal/types/vector.hpp>
#include <chrono>
#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "metrics/metrics.hpp"
#include "runtime/auth.hpp"
#include "runtime/fd_transport.hpp"
#include "runtime/protocol.hpp"
#include "sky/detail/call.hpp"
#include "sky/detail/serialize.hpp"
#include "sky/errors.hpp"

using namespace sky::detail;
using namespace std::chrono_literals;

namespace {

long max_rss_kib() {
    rusage ru{};
    ::getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

// A transport that keeps a copy of every byte that crosses it, both ways.
class Tap final : public Transport {
public:
    explicit Tap(Transport& t) : t_(t) {}
    std::size_t read_some(std::span<std::byte> buf) override {
        std::size_t n = t_.read_some(buf);
        seen.append(reinterpret_cast<const char*>(buf.data()), n);
        return n;
    }
    void write_all(std::span<const std::span<const std::byte>> bufs) override {
        for (auto& b : bufs) seen.append(reinterpret_cast<const char*>(b.data()), b.size());
        t_.write_all(bufs);
    }
    void shutdown() noexcept override { t_.shutdown(); }
    bool wait_readable(std::chrono::milliseconds timeout) override {
        return t_.wait_readable(timeout);
    }
    [[nodiscard]] std::string describe() const override { return "tap"; }
    std::string seen;

private:
    Transport& t_;
};

struct Handshake {
    int worker_fd = -1;  // what worker_authenticate returned
    std::string client_error;
    bool client_protocol_error = false;
    std::string wire;  // every byte, both directions, as the client saw them
    std::vector<std::string> notes;
};

// The real worker side in a thread, the real client side here, over a socketpair.
Handshake run_handshake(const std::string& worker_token, const std::string& client_token) {
    int sv[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    Handshake o;
    std::thread w([&] {
        o.worker_fd =
            worker_authenticate(-1, sv[1], worker_token, std::chrono::steady_clock::now() + 10s,
                                10s, [&](const std::string& m) { o.notes.push_back(m); });
    });
    {
        FdTransport ft(sv[0], "client end");
        Tap tap(ft);
        FrameReader r(tap, auth_max_frame);
        try {
            client_authenticate(tap, r, client_token, 10s);
        } catch (const sky::ProtocolError& e) {
            o.client_error = e.what();
            o.client_protocol_error = true;
        } catch (const std::exception& e) {
            o.client_error = e.what();
        }
        // The worker decides only once the client answered; unblock it if the client gave up.
        ft.shutdown();
        w.join();
        o.wire = tap.seen;
    }
    if (o.worker_fd >= 0) ::close(o.worker_fd);
    return o;
}

}  // namespace

TEST_CASE("random ids come from RAND_bytes: distinct, hex, of the length asked", "[auth]") {
    std::set<std::string> seen;
    for (int i = 0; i < 2000; ++i) {
        std::string s = random_hex(32);
        REQUIRE(s.size() == 32);
        CHECK(s.find_first_not_of("0123456789abcdef") == std::string::npos);
        seen.insert(s);
    }
    CHECK(seen.size() == 2000);
    CHECK(random_hex(7).size() == 7);
    CHECK(random_hex(0).empty());
    // Every hex digit shows up in each position's mix: not a constant or a short cycle.
    std::set<char> digits;
    for (auto& s : seen) digits.insert(s[0]);
    CHECK(digits.size() == 16);
    AuthBlock a{}, b{};
    random_bytes(a);
    random_bytes(b);
    CHECK_FALSE(auth_equal(a, b));
}

TEST_CASE("the MAC binds the token, the direction and both nonces", "[auth]") {
    AuthBlock nw{}, nc{};
    random_bytes(nw);
    random_bytes(nc);
    const AuthBlock m = auth_mac("token", 'c', nw, nc);
    CHECK(auth_equal(m, auth_mac("token", 'c', nw, nc)));
    CHECK_FALSE(auth_equal(m, auth_mac("tokem", 'c', nw, nc)));
    CHECK_FALSE(auth_equal(m, auth_mac("token", 'w', nw, nc)));
    CHECK_FALSE(auth_equal(m, auth_mac("token", 'c', nc, nw)));
}

TEST_CASE("client and worker authenticate each other, the token never crosses the wire", "[auth]") {
    const std::string token = random_hex(32);
    Handshake o = run_handshake(token, token);
    CHECK(o.client_error.empty());
    CHECK(o.worker_fd >= 0);
    CHECK(o.notes.empty());
    // Challenge (24 + 32), answer (24 + 64), proof (24 + 32).
    CHECK(o.wire.size() == 56 + 88 + 56);
    CHECK(o.wire.find(token) == std::string::npos);
    CHECK(o.wire.find(token.substr(0, 8)) == std::string::npos);
}

TEST_CASE("a client without the token is refused by the worker", "[auth]") {
    Handshake o = run_handshake(random_hex(32), random_hex(32));
    CHECK(o.worker_fd < 0);
    REQUIRE(o.notes.size() == 1);
    CHECK_THAT(o.notes[0], Catch::Contains("wrong HMAC"));
    // The worker sent no proof: the client sees the connection end, never a proof to check.
    CHECK_FALSE(o.client_error.empty());
    CHECK(o.wire.size() == 56 + 88);
}

TEST_CASE("a worker that cannot prove it holds the token is refused by the client", "[auth]") {
    // A forged worker: it sends a challenge and then a proof made up without the token.
    int sv[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    std::thread fake([fd = sv[1]] {
        FdTransport t(fd, "fake worker");
        AuthBlock nw{}, forged{};
        random_bytes(nw);
        random_bytes(forged);
        Buffer out;
        append_frame(out, MsgType::auth, 0, nw);
        std::span<const std::byte> one[] = {out.span()};
        t.write_all(one);
        FrameReader r(t, auth_max_frame);
        Frame f;
        if (!r.next(f)) return;
        Buffer proof;
        append_frame(proof, MsgType::auth, 0, forged);
        std::span<const std::byte> two[] = {proof.span()};
        t.write_all(two);
    });
    FdTransport t(sv[0], "client end");
    FrameReader r(t, auth_max_frame);
    try {
        client_authenticate(t, r, "the real token", 10s);
        FAIL("the client accepted a forged proof");
    } catch (const sky::ProtocolError& e) {
        CHECK_THAT(e.what(), Catch::Contains("authentication failed"));
    }
    fake.join();
}

TEST_CASE("a worker that sends anything but a challenge first is refused, unread", "[auth]") {
    for (int kind = 0; kind < 3; ++kind) {
        int sv[2];
        REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
        Buffer out;
        if (kind == 0) {
            // A hello (what an old worker, or an impostor replaying one, sends first).
            WorkerHello wh;
            Buffer p;
            save_to(p, wh);
            append_frame(out, MsgType::hello, 0, p.span());
        } else if (kind == 1) {
            // A header that claims a 3 GiB frame.
            out.resize(frame_header_size);
            encode_header(out.data(), MsgType::auth, 0, 3ull << 30);
        } else {
            const char junk[] = "not a frame header, not at all";
            out.append(junk, sizeof junk);
        }
        REQUIRE(::write(sv[1], out.data(), out.size()) == static_cast<ssize_t>(out.size()));
        FdTransport t(sv[0], "client end");
        FrameReader r(t, auth_max_frame);
        CHECK_THROWS_AS(client_authenticate(t, r, "tok", 5s), sky::ProtocolError);
        ::close(sv[1]);
    }
    CHECK(max_rss_kib() < 300 * 1024);
}

TEST_CASE("the worker drops garbage, truncated and oversized answers without a crash", "[auth]") {
    auto try_answer = [](const Buffer& answer, bool close_after) {
        int sv[2];
        REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
        std::vector<std::string> notes;
        int got = -2;
        std::thread w([&] {
            got = worker_authenticate(-1, sv[1], "tok", std::chrono::steady_clock::now() + 5s, 2s,
                                      [&](const std::string& m) { notes.push_back(m); });
        });
        char challenge[56];
        REQUIRE(::recv(sv[0], challenge, sizeof challenge, MSG_WAITALL) == 56);
        if (answer.size()) (void)!::write(sv[0], answer.data(), answer.size());
        if (close_after) ::shutdown(sv[0], SHUT_WR);
        w.join();
        ::close(sv[0]);
        CHECK(got == -1);
        CHECK(notes.size() == 1);
    };
    Buffer junk;
    junk.append("GET / HTTP/1.1\r\nHost: x\r\n\r\n", 27);
    try_answer(junk, true);
    Buffer huge;
    huge.resize(frame_header_size);
    encode_header(huge.data(), MsgType::auth, 0, 3ull << 30);
    try_answer(huge, false);
    Buffer hello;  // a hello where the answer belongs
    hello.resize(frame_header_size);
    encode_header(hello.data(), MsgType::hello, 0, 64);
    try_answer(hello, false);
    Buffer cut;  // a right header, then half the answer, then the end
    cut.resize(frame_header_size + 20);
    encode_header(cut.data(), MsgType::auth, 0, 64);
    try_answer(cut, true);
    try_answer(Buffer{}, false);  // silence: dropped after its time
    CHECK(max_rss_kib() < 300 * 1024);
}

namespace {

// A TCP socket from `source` (a loopback address) to 127.0.0.1:port; connected, or in
// progress when `wait` is false.
int connect_from(const char* source, std::uint16_t port, bool wait) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | (wait ? 0 : SOCK_NONBLOCK), 0);
    REQUIRE(fd >= 0);
    sockaddr_in from{};
    from.sin_family = AF_INET;
    REQUIRE(::inet_pton(AF_INET, source, &from.sin_addr) == 1);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) == 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(port);
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const int r = ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to);
    REQUIRE((r == 0 || (!wait && errno == EINPROGRESS)));
    return fd;
}

// The real worker side on a loopback listener (backlog 16, as a worker's), and a client that
// reads its challenge, then waits while `squat` opens connections that never speak (or speak a
// first piece of an answer), then answers: whether the client got in.
struct Squatted {
    bool client_in = false;
    std::vector<std::string> notes;
};
Squatted squatted_handshake(const std::string& allow_from, const char* squatters_from,
                            int squatters, bool client_speaks_first) {
    const int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(lfd >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(lfd, 16) == 0);
    socklen_t len = sizeof a;
    ::getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len);
    const std::uint16_t port = ntohs(a.sin_port);
    Squatted o;
    std::mutex m;
    int got = -2;
    std::vector<int> idle;
    int client = -1;
    std::thread w([&] {
        got = worker_authenticate(
            lfd, -1, "tok", std::chrono::steady_clock::now() + 10s, 5s,
            [&](const std::string& n) {
                std::lock_guard lk(m);
                o.notes.push_back(n);
            },
            allow_from);
    });
    // Also when a REQUIRE fails: the worker ends by its deadline, every socket is closed.
    struct Cleanup {
        std::thread& w;
        std::vector<int>& fds;
        int& client;
        int lfd;
        ~Cleanup() {
            if (client >= 0) ::shutdown(client, SHUT_RDWR);
            if (w.joinable()) w.join();
            for (int fd : fds) ::close(fd);
            if (client >= 0) ::close(client);
            ::close(lfd);
        }
    } cleanup{w, idle, client, lfd};
    client = connect_from("127.0.0.1", port, true);
    timeval tv{5, 0};
    ::setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    std::array<std::byte, frame_header_size + auth_nonce_size> challenge{};
    REQUIRE(::recv(client, challenge.data(), challenge.size(), MSG_WAITALL) ==
            static_cast<ssize_t>(challenge.size()));
    AuthBlock nw{};
    std::memcpy(nw.data(), challenge.data() + frame_header_size, nw.size());
    const ClientAuthAnswer answer = client_auth_answer("tok", nw);
    std::size_t sent = 0;
    if (client_speaks_first) {
        REQUIRE(::send(client, answer.frame.data(), frame_header_size, MSG_NOSIGNAL) ==
                static_cast<ssize_t>(frame_header_size));
        sent = frame_header_size;
    }
    for (int i = 0; i < squatters; ++i) idle.push_back(connect_from(squatters_from, port, false));
    // The worker meets them all: those beyond the backlog come back with the kernel's SYN
    // retransmission, 1 s later (a slow client's round trip, many times over).
    std::this_thread::sleep_for(1500ms);
    REQUIRE(::send(client, answer.frame.data() + sent, answer.frame.size() - sent, MSG_NOSIGNAL) ==
            static_cast<ssize_t>(answer.frame.size() - sent));
    std::array<std::byte, frame_header_size + auth_mac_size> proof{};
    if (::recv(client, proof.data(), proof.size(), MSG_WAITALL) ==
        static_cast<ssize_t>(proof.size())) {
        AuthBlock p{};
        std::memcpy(p.data(), proof.data() + frame_header_size, p.size());
        o.client_in = auth_equal(p, answer.expected_proof);
    }
    w.join();
    if (got >= 0) ::close(got);
    o.client_in = o.client_in && got >= 0;
    return o;
}

}  // namespace

TEST_CASE("40 idle connections from another address do not keep the client out", "[auth]") {
    // At most auth_pending_per_source of them wait at once: each newcomer replaces one of its
    // own, never the client.
    const auto any = squatted_handshake("", "127.0.0.2", 40, false);
    INFO(any.notes.size() << " notes, first: " << (any.notes.empty() ? "" : any.notes.front()));
    CHECK(any.client_in);
    bool replaced = false;
    for (const auto& n : any.notes) replaced |= n.find("from 127.0.0.2") != std::string::npos;
    CHECK(replaced);
    // Where the client's address is known, no other is even served a challenge.
    const auto only = squatted_handshake("127.0.0.1", "127.0.0.2", 40, false);
    CHECK(only.client_in);
    std::size_t refused = 0, served = 0;
    for (const auto& n : only.notes) {
        refused +=
            n.find("refused a connection from 127.0.0.2: only 127.0.0.1") != std::string::npos;
        served += n.find("dropped a connection from 127.0.0.2") != std::string::npos;
    }
    CHECK(refused >= 16);
    CHECK(served == 0);
}

TEST_CASE("a client that has spoken is never dropped for newcomers from its own address",
          "[auth]") {
    const auto r = squatted_handshake("", "127.0.0.1", 40, true);
    INFO(r.notes.size() << " notes");
    CHECK(r.client_in);
}

TEST_CASE("bounded decoding refuses sizes larger than the bytes left, before allocating",
          "[serialize][auth]") {
    auto claim = [](std::uint64_t n) {
        Buffer b;
        b.append(&n, 8);
        b.append("abcdefgh", 8);
        return b;
    };
    const Buffer big = claim(3ull << 30);
    std::string s;
    CHECK_THROWS_AS(load_from(big.span(), s), cereal::Exception);
    std::vector<std::string> vs;
    CHECK_THROWS_AS(load_from(big.span(), vs), cereal::Exception);
    std::vector<double> vd;
    CHECK_THROWS_AS(load_from(big.span(), vd), cereal::Exception);
    CHECK_THROWS_AS(load_each(big.span(), vd), cereal::Exception);
    std::map<std::string, int> m;
    CHECK_THROWS_AS(load_from(big.span(), m), cereal::Exception);
    std::vector<std::array<double, 4096>> va;  // 32 KiB elements: memory follows the bytes
    CHECK_THROWS_AS(load_from(claim(16).span(), va), cereal::Exception);
    // A count that fits in the bytes but whose elements do not: 8 elements of 8 bytes in 8.
    std::vector<std::uint64_t> vu;
    CHECK_THROWS_AS(load_from(claim(8).span(), vu), cereal::Exception);
    // The messages of the protocol, and results decoded for the caller.
    Buffer hello;
    std::uint32_t proto = protocol_version;
    hello.append(&proto, 4);
    std::uint64_t n = 3ull << 30;
    hello.append(&n, 8);
    hello.append("abcd", 4);
    WorkerHello wh;
    CHECK_THROWS_AS(load_from(hello.span(), wh), cereal::Exception);
    ClientHello ch;
    CHECK_THROWS_AS(load_from(hello.span(), ch), cereal::Exception);
    ErrorMsg em;
    CHECK_THROWS_AS(load_from(hello.span(), em), cereal::Exception);
    sky::detail::Outcome o;
    o.result.append(big.data(), big.size());
    CHECK_THROWS_AS(take<std::string>(o), sky::ProtocolError);
    CHECK_THROWS_AS(take<std::vector<std::string>>(o), sky::ProtocolError);
    CHECK(max_rss_kib() < 300 * 1024);
}

TEST_CASE("every truncation and random bytes in protocol messages decode or throw, no crash",
          "[serialize][auth]") {
    WorkerHello wh;
    wh.build_id = "abc";
    wh.hostname = "host";
    wh.functions = {{"f", 1}, {"g", 2}};
    ClientHello ch;
    ch.pool_id = "pool";
    ch.accelerators = {"H100", "H100"};
    ErrorMsg em{ErrorMsg::exception, "std::runtime_error", "boom", {"a", "b"}};
    sky::Metrics ms;
    ms.gpu_utilization = 50.0;
    Buffer bw, bc, be, bm;
    save_to(bw, wh);
    save_to(bc, ch);
    save_to(be, em);
    save_to(bm, ms);
    auto all_cuts = [](const Buffer& b, auto value) {
        for (std::size_t k = 0; k < b.size(); ++k) {
            auto v = value;
            CHECK_THROWS_AS(load_from(b.span().subspan(0, k), v), cereal::Exception);
        }
        auto v = value;
        CHECK_NOTHROW(load_from(b.span(), v));
    };
    all_cuts(bw, WorkerHello{});
    all_cuts(bc, ClientHello{});
    all_cuts(be, ErrorMsg{});
    all_cuts(bm, sky::Metrics{});
    std::mt19937 rng(42);
    for (int round = 0; round < 2000; ++round) {
        Buffer junk;
        std::size_t len = rng() % 200;
        for (std::size_t i = 0; i < len; ++i) junk.push_back(static_cast<std::byte>(rng()));
        WorkerHello a;
        ClientHello b;
        ErrorMsg c;
        sky::Metrics d;
        try {
            load_from(junk.span(), a);
        } catch (const cereal::Exception&) {
        }
        try {
            load_from(junk.span(), b);
        } catch (const cereal::Exception&) {
        }
        try {
            load_from(junk.span(), c);
        } catch (const cereal::Exception&) {
        }
        try {
            load_from(junk.span(), d);
        } catch (const cereal::Exception&) {
        }
    }
    CHECK(max_rss_kib() < 300 * 1024);
}

TEST_CASE("the bounded archive reads what cereal's binary archive writes", "[serialize][auth]") {
    std::vector<bool> vb{true, false, true};
    std::vector<std::array<int, 3>> va{{1, 2, 3}, {4, 5, 6}};
    std::vector<std::vector<std::string>> vvs{{"a", "b"}, {}, {"c"}};
    std::unique_ptr<int> up = std::make_unique<int>(7);
    std::deque<int> dq{1, 2, 3};
    std::ostringstream os;
    {
        cereal::BinaryOutputArchive ar(os);
        ar(vb, va, vvs, up, dq);
    }
    const std::string bytes = os.str();
    Buffer b;
    b.append(bytes.data(), bytes.size());
    std::vector<bool> vb2;
    std::vector<std::array<int, 3>> va2;
    std::vector<std::vector<std::string>> vvs2;
    std::unique_ptr<int> up2;
    std::deque<int> dq2;
    load_from(b.span(), vb2, va2, vvs2, up2, dq2);
    CHECK(vb2 == vb);
    CHECK(va2 == va);
    CHECK(vvs2 == vvs);
    REQUIRE(up2);
    CHECK(*up2 == 7);
    CHECK(dq2 == dq);
    STATIC_REQUIRE(sky::serializable<std::vector<bool>>);
}

namespace {

// A Transport that forwards to another one it does not own (a SealedTransport over a Tap).
class Forward final : public Transport {
public:
    explicit Forward(Transport& t) : t_(t) {}
    std::size_t read_some(std::span<std::byte> buf) override { return t_.read_some(buf); }
    void write_all(std::span<const std::span<const std::byte>> bufs) override {
        t_.write_all(bufs);
    }
    void shutdown() noexcept override { t_.shutdown(); }
    bool wait_readable(std::chrono::milliseconds timeout) override {
        return t_.wait_readable(timeout);
    }
    [[nodiscard]] std::string describe() const override { return t_.describe(); }

private:
    Transport& t_;
};

std::span<const std::byte> bytes_of(const std::string& s) {
    return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

}  // namespace

TEST_CASE(
    "a sealing worker and its client: only nonces and public keys cross in clear, every byte "
    "after the proof is sealed",
    "[auth][seal]") {
    const std::string token = random_hex(32);
    const std::string argument = "a call's argument: secret-argument-7781";
    const std::string result = "its result: secret-result-1187";
    int sv[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    std::optional<io::SealKeys> worker_keys;
    std::string worker_got, worker_error;
    std::vector<std::string> notes;
    std::thread w([&] {
        const int fd = worker_authenticate(
            -1, sv[1], token, std::chrono::steady_clock::now() + 10s, 10s,
            [&](const std::string& m) { notes.push_back(m); }, {}, &worker_keys);
        if (fd < 0 || !worker_keys) return;
        try {
            io::SealedTransport t(std::make_unique<FdTransport>(fd, "worker end"), *worker_keys);
            std::string got(argument.size(), '\0');
            std::size_t have = 0;
            while (have < got.size()) {
                const std::size_t n = t.read_some(
                    {reinterpret_cast<std::byte*>(got.data()) + have, got.size() - have});
                if (n == 0) break;
                have += n;
            }
            worker_got = got.substr(0, have);
            std::span<const std::byte> one[] = {bytes_of(result)};
            t.write_all(one);
        } catch (const std::exception& e) {
            worker_error = e.what();
        }
    });
    FdTransport ft(sv[0], "client end");
    Tap tap(ft);
    FrameReader r(tap, auth_max_frame);
    std::optional<io::SealKeys> keys;
    std::string client_got;
    try {
        keys = client_authenticate(tap, r, token, 10s, true);
        REQUIRE(keys);
        io::SealedTransport t(std::make_unique<Forward>(tap), *keys, r.take_buffered());
        std::span<const std::byte> one[] = {bytes_of(argument)};
        t.write_all(one);
        std::string got(result.size(), '\0');
        std::size_t have = 0;
        while (have < got.size()) {
            const std::size_t n =
                t.read_some({reinterpret_cast<std::byte*>(got.data()) + have, got.size() - have});
            if (n == 0) break;
            have += n;
        }
        client_got = got.substr(0, have);
    } catch (const std::exception& e) {
        FAIL(e.what());
    }
    w.join();
    INFO(worker_error);
    CHECK(notes.empty());
    REQUIRE(worker_keys);
    CHECK(keys->seal == worker_keys->open);
    CHECK(keys->open == worker_keys->seal);
    CHECK(keys->seal != keys->open);
    CHECK(worker_got == argument);
    CHECK(client_got == result);
    // Challenge (24 + 64), answer (24 + 96), proof (24 + 32), then two sealed records.
    CHECK(tap.seen.size() ==
          88 + 120 + 56 + 2 * io::seal_overhead + argument.size() + result.size());
    CHECK(tap.seen.find(token) == std::string::npos);
    CHECK(tap.seen.find(token.substr(0, 8)) == std::string::npos);
    CHECK(tap.seen.find("secret-argument") == std::string::npos);
    CHECK(tap.seen.find("secret-result") == std::string::npos);
}

TEST_CASE("a client that needs a sealed stream refuses a worker that does not seal",
          "[auth][seal]") {
    int sv[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    std::thread w([&] {
        const int fd = worker_authenticate(-1, sv[1], "tok", std::chrono::steady_clock::now() + 5s,
                                           5s, [](const std::string&) {});
        if (fd >= 0) ::close(fd);
    });
    FdTransport ft(sv[0], "client end");
    FrameReader r(ft, auth_max_frame);
    std::string error;
    try {
        (void)client_authenticate(ft, r, "tok", 5s, true);
    } catch (const sky::ProtocolError& e) {
        error = e.what();
    }
    ft.shutdown();
    w.join();
    CHECK_THAT(error, Catch::Contains("does not encrypt its stream"));
}

TEST_CASE(
    "a sealing worker drops a plain answer (a downgrade) and an answer to a swapped key (a man "
    "in the middle)",
    "[auth][seal]") {
    for (const bool swap_key : {false, true}) {
        int sv[2];
        REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
        std::optional<io::SealKeys> keys;
        std::vector<std::string> notes;
        int got = -2;
        std::thread w([&] {
            got = worker_authenticate(
                -1, sv[1], "tok", std::chrono::steady_clock::now() + 5s, 5s,
                [&](const std::string& m) { notes.push_back(m); }, {}, &keys);
        });
        FdTransport ft(sv[0], "client end");
        FrameReader r(ft, auth_max_frame);
        Frame challenge;
        REQUIRE(r.next(challenge));
        REQUIRE(challenge.payload.size() == 64);
        CHECK((challenge.header.flags & auth_flag_seal) != 0);
        ClientAuthAnswer answer;
        if (swap_key) {
            // The middle replaces the worker's key with its own: the client's MAC covers the
            // key it saw, which is not the worker's.
            const X25519Key middle;
            const AuthBlock k = middle.public_key();
            Frame forged;
            forged.header = challenge.header;
            forged.owned.resize(64);
            std::memcpy(forged.owned.data(), challenge.payload.data(), 32);
            std::memcpy(forged.owned.data() + 32, k.data(), 32);
            forged.payload = forged.owned.span();
            answer = client_auth_answer("tok", forged, true);
        } else {
            // The middle cleared the flag: the client answers as to a plain worker.
            AuthBlock nw{};
            std::memcpy(nw.data(), challenge.payload.data(), 32);
            answer = client_auth_answer("tok", nw);
        }
        std::span<const std::byte> one[] = {answer.frame.span()};
        ft.write_all(one);
        w.join();
        INFO("swap_key " << swap_key);
        CHECK(got < 0);
        CHECK_FALSE(keys);
        REQUIRE(notes.size() == 1);
        CHECK_THAT(notes[0], Catch::Contains(swap_key ? "wrong HMAC" : "a plain answer"));
    }
}

TEST_CASE("the token two ends agree on from public keys is the same on both, and never sent",
          "[auth][seal]") {
    const X25519Key client, worker;
    const std::string a = agreed_token(client, worker.public_key());
    const std::string b = agreed_token(worker, client.public_key());
    CHECK(a == b);
    CHECK(a.size() == 64);
    const std::string text = public_key_text(worker.public_key());
    CHECK(text.rfind("x25519:", 0) == 0);
    REQUIRE(parse_public_key(text));
    CHECK(*parse_public_key(text) == worker.public_key());
    CHECK(text.find(a.substr(0, 16)) == std::string::npos);
    CHECK_FALSE(parse_public_key("x25519:" + std::string(63, 'a')));
    CHECK_FALSE(parse_public_key("x25519:" + std::string(64, 'g')));
    // A low-order point (all zeros) gives no secret: refused, not a predictable token.
    CHECK_THROWS_AS(agreed_token(client, AuthBlock{}), sky::ProtocolError);
    // Another key pair agrees on another token.
    const X25519Key other;
    CHECK(agreed_token(other, worker.public_key()) != a);
}
