// Nobody but the client reaches a worker, and nobody but the worker reaches the client:
// hand-made hostile peers against real worker processes, and fake workers (this binary started
// with SKY_E2E_FAKE_WORKER, see fake_worker) against a real pool.
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>

#include "e2e/local/functions.hpp"
#include "e2e/local/wire.hpp"
#include "sky/detail/registry.hpp"

using namespace e2e;
namespace d = sky::detail;
using namespace std::chrono_literals;

namespace {

// The first step of an impostor: read the challenge, answer with a MAC made with the wrong
// token; returns whether the worker then ended the connection without a proof.
bool wrong_hmac_is_dropped(int fd) {
    d::FdTransport t(fd, "impostor");
    d::FrameReader r(t, d::auth_max_frame);
    d::Frame f;
    REQUIRE(r.next(f));
    REQUIRE(f.header.type == d::MsgType::auth);
    REQUIRE(f.payload.size() == 32);
    d::AuthBlock nw{}, nc{};
    std::memcpy(nw.data(), f.payload.data(), 32);
    d::random_bytes(nc);
    d::AuthBlock mac = d::auth_mac("not the token", 'c', nw, nc);
    d::Buffer p, out;
    p.append(nc.data(), 32);
    p.append(mac.data(), 32);
    wire::frame(out, d::MsgType::auth, 0, p);
    wire::send(t, out);
    if (!t.wait_readable(10s)) return false;
    std::byte b[64];
    return t.read_some(b) == 0;  // closed, nothing sent
}

// A peer that sends `bytes` after reading the challenge; true when the worker closed on it.
bool junk_is_dropped(int fd, const d::Buffer& bytes) {
    d::FdTransport t(fd, "junk");
    char challenge[56];
    REQUIRE(::recv(fd, challenge, sizeof challenge, MSG_WAITALL) == 56);
    wire::send(t, bytes);
    if (!t.wait_readable(15s)) return false;
    std::byte b[64];
    try {
        return t.read_some(b) == 0;
    } catch (...) {
        return true;  // reset
    }
}

d::Buffer header_only(d::MsgType type, std::uint64_t length) {
    d::Buffer b;
    b.resize(d::frame_header_size);
    d::encode_header(b.data(), type, 0, length);
    return b;
}

// A call of add(a, b) over an authenticated connection; returns the result.
int call_add(d::Transport& t, d::FrameReader& r, int a, int b, std::uint64_t id) {
    d::Buffer out;
    wire::call_frame(out, id, sky::compute<add>(a, b).desc());
    wire::send(t, out);
    d::Frame f;
    REQUIRE(wire::next_answer(r, f));
    REQUIRE(f.header.type == d::MsgType::result);
    CHECK(f.header.call_id == id);
    int v = 0;
    d::load_from(f.payload, v);
    return v;
}

}  // namespace

TEST_CASE("a TCP worker drops peers without the token and still serves the real client",
          "[local][auth]") {
    TempDir dir;
    const std::string token = d::random_hex(32);
    const std::string port_file = dir.path + "/port";
    pid_t pid =
        wire::spawn_worker({"SKY_WORKER_LISTEN=127.0.0.1:0", "SKY_WORKER_TOKEN=" + token,
                            "SKY_WORKER_PORT_FILE=" + port_file, "SKY_WORKER_ACCEPT_TIMEOUT=30"});
    const int port = std::stoi(wire::wait_port_file(port_file));
    REQUIRE(port > 0);
    auto connect = [&] { return d::connect_tcp("127.0.0.1", port, 5s); };
    // A squatter that connects first and says nothing keeps its connection open meanwhile.
    int squatter = connect();
    CHECK(wrong_hmac_is_dropped(connect()));
    const char junk[] = "this is not a frame header at all.......";
    d::Buffer garbage;
    garbage.append(junk, sizeof junk);
    CHECK(junk_is_dropped(connect(), garbage));
    CHECK(junk_is_dropped(connect(), header_only(d::MsgType::auth, 3ull << 30)));
    CHECK(junk_is_dropped(connect(), header_only(d::MsgType::hello, 100)));
    {
        d::Buffer cut = header_only(d::MsgType::auth, 64);
        cut.append("half an answer", 14);
        int fd = connect();
        char challenge[56];
        REQUIRE(::recv(fd, challenge, sizeof challenge, MSG_WAITALL) == 56);
        REQUIRE(::send(fd, cut.data(), cut.size(), MSG_NOSIGNAL) == (ssize_t)cut.size());
        ::close(fd);  // truncated, then gone
    }
    // The real client.
    d::FdTransport t(connect(), "client");
    std::unique_ptr<d::FrameReader> r;
    d::WorkerHello wh = wire::connect_client(t, r, token);
    CHECK(wh.build_id == d::self_build_id());
    CHECK_FALSE(wh.functions.empty());
    CHECK(call_add(t, *r, 2, 3, 77) == 5);
    // The listener is closed once the client authenticated: nobody else gets in now.
    CHECK_THROWS(d::connect_tcp("127.0.0.1", port, 1s));
    ::close(squatter);
    // Garbage from the authenticated client: the worker closes and exits cleanly.
    wire::send(t, garbage);
    wire::Exit e = wire::wait_exit(pid, 10s);
    REQUIRE(e.exited);
    CHECK(WIFEXITED(e.status));
    CHECK(WEXITSTATUS(e.status) == 4);
    CHECK(e.max_rss_kib < 300 * 1024);
}

TEST_CASE("a worker on a Unix socket: 0600, port file 'unix', removed once the client is in",
          "[local][auth]") {
    TempDir dir;
    REQUIRE(::chmod(dir.path.c_str(), 0700) == 0);
    const std::string token = d::random_hex(32);
    const std::string sock = dir.path + "/worker.sock";
    const std::string port_file = dir.path + "/port";
    pid_t pid =
        wire::spawn_worker({"SKY_WORKER_LISTEN=unix:" + sock, "SKY_WORKER_TOKEN=" + token,
                            "SKY_WORKER_PORT_FILE=" + port_file, "SKY_WORKER_ACCEPT_TIMEOUT=30"});
    CHECK(wire::wait_port_file(port_file) == "unix\n");
    struct stat st {};
    REQUIRE(::lstat(sock.c_str(), &st) == 0);
    CHECK(S_ISSOCK(st.st_mode));
    CHECK((st.st_mode & 0777) == 0600);
    CHECK(wrong_hmac_is_dropped(d::connect_unix(sock)));
    CHECK(junk_is_dropped(d::connect_unix(sock), header_only(d::MsgType::call, 1 << 20)));
    d::FdTransport t(d::connect_unix(sock), "client");
    std::unique_ptr<d::FrameReader> r;
    wire::connect_client(t, r, token);
    CHECK(call_add(t, *r, 20, 22, 1) == 42);
    CHECK(::access(sock.c_str(), F_OK) != 0);  // gone
    d::Buffer bye;
    wire::frame(bye, d::MsgType::shutdown, 0, d::Buffer{});
    wire::send(t, bye);
    wire::Exit e = wire::wait_exit(pid, 10s);
    REQUIRE(e.exited);
    CHECK(WIFEXITED(e.status));
    CHECK(WEXITSTATUS(e.status) == 0);
}

TEST_CASE("a listening worker nobody authenticates to exits at its deadline, socket removed",
          "[local][auth]") {
    TempDir dir;
    REQUIRE(::chmod(dir.path.c_str(), 0700) == 0);
    const std::string sock = dir.path + "/w.sock";
    const std::string port_file = dir.path + "/port";
    pid_t pid =
        wire::spawn_worker({"SKY_WORKER_LISTEN=unix:" + sock, "SKY_WORKER_TOKEN=tok",
                            "SKY_WORKER_PORT_FILE=" + port_file, "SKY_WORKER_ACCEPT_TIMEOUT=2"});
    wire::wait_port_file(port_file);
    CHECK(wrong_hmac_is_dropped(d::connect_unix(sock)));
    wire::Exit e = wire::wait_exit(pid, 10s);
    REQUIRE(e.exited);
    CHECK(WIFEXITED(e.status));
    CHECK(WEXITSTATUS(e.status) == 5);
    CHECK(::access(sock.c_str(), F_OK) != 0);
}

TEST_CASE("a socketpair worker given a wrong HMAC exits cleanly without serving", "[local][auth]") {
    int sv[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    pid_t pid = wire::spawn_worker({"SKY_WORKER_FD=3", "SKY_WORKER_TOKEN=right"}, sv[1]);
    ::close(sv[1]);
    CHECK(wrong_hmac_is_dropped(sv[0]));
    wire::Exit e = wire::wait_exit(pid, 10s);
    REQUIRE(e.exited);
    CHECK(WIFEXITED(e.status));
    CHECK(WEXITSTATUS(e.status) == 3);
}

TEST_CASE("hostile hellos and frames after authentication never crash or bloat the worker",
          "[local][auth]") {
    // Each: what an authenticated client sends instead of a proper hello.
    std::vector<d::Buffer> cases;
    {
        d::Buffer p;  // protocol, then a pool id that claims 3 GiB
        std::uint32_t proto = d::protocol_version;
        std::uint64_t n = 3ull << 30;
        p.append(&proto, 4);
        p.append(&n, 8);
        p.append("abcd", 4);
        d::Buffer f;
        wire::frame(f, d::MsgType::hello, 0, p);
        cases.push_back(std::move(f));
    }
    {
        d::ClientHello ch;  // a proper hello cut short
        ch.pool_id = "pool";
        d::Buffer p, f;
        d::save_to(p, ch);
        d::Buffer cut;
        cut.append(p.data(), p.size() / 2);
        wire::frame(f, d::MsgType::hello, 0, cut);
        cases.push_back(std::move(f));
    }
    cases.push_back(header_only(d::MsgType::hello, 3ull << 30));  // over the 1 MiB hello limit
    cases.push_back(header_only(d::MsgType::call, 0));            // not a hello
    for (auto& bad : cases) {
        int sv[2];
        REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
        pid_t pid = wire::spawn_worker({"SKY_WORKER_FD=3", "SKY_WORKER_TOKEN=tok"}, sv[1]);
        ::close(sv[1]);
        d::FdTransport t(sv[0], "client");
        auto r = std::make_unique<d::FrameReader>(t, d::auth_max_frame);
        d::client_authenticate(t, *r, "tok", 10s);
        wire::send(t, bad);
        wire::Exit e = wire::wait_exit(pid, 10s);
        REQUIRE(e.exited);
        CHECK(WIFEXITED(e.status));
        CHECK(WEXITSTATUS(e.status) == 3);
        CHECK(e.max_rss_kib < 300 * 1024);
    }
    // Calls whose arguments claim 3 GiB: a RemoteError for that call, the worker goes on.
    int sv[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    pid_t pid = wire::spawn_worker({"SKY_WORKER_FD=3", "SKY_WORKER_TOKEN=tok"}, sv[1]);
    ::close(sv[1]);
    d::FdTransport t(sv[0], "client");
    std::unique_ptr<d::FrameReader> r;
    wire::connect_client(t, r, "tok");
    auto call = sky::compute<concat>(std::string("a"), std::string("b"), 2);
    d::Buffer cp, out;
    d::append_call_header(cp, call.desc().function, call.desc().signature);
    std::uint64_t n = 3ull << 30;
    cp.append(&n, 8);
    cp.append("xy", 2);
    wire::frame(out, d::MsgType::call, 5, cp);
    wire::send(t, out);
    d::Frame f;
    REQUIRE(wire::next_answer(*r, f));
    CHECK(f.header.type == d::MsgType::error);
    CHECK(call_add(t, *r, 1, 1, 6) == 2);
    t.shutdown();
    wire::Exit e = wire::wait_exit(pid, 10s);
    REQUIRE(e.exited);
    CHECK(WIFEXITED(e.status));
    CHECK(e.max_rss_kib < 300 * 1024);
}

namespace {
long self_max_rss_kib() {
    rusage ru{};
    ::getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}
sky::PoolSpec fake_spec(const std::string& mode, std::map<std::string, std::string> extra = {}) {
    sky::PoolSpec s = quiet(1);
    s.env = std::move(extra);
    s.env["SKY_E2E_FAKE_WORKER"] = mode;
    return s;
}
}  // namespace

TEST_CASE("a fake worker with a forged proof is refused by the pool with a typed error",
          "[local][auth]") {
    try {
        sky::ComputePool pool{fake_spec("forged")};
        FAIL("the pool accepted a worker that cannot prove it holds the token");
    } catch (const sky::ProtocolError& e) {
        CHECK_THAT(e.what(), Catch::Contains("authentication failed"));
        CHECK_THAT(e.what(), Catch::Contains("node 0"));
    }
}

TEST_CASE("a fake worker whose hello claims a 3 GiB string: typed error, no big allocation",
          "[local][auth]") {
    try {
        sky::ComputePool pool{fake_spec("bomb")};
        FAIL("the pool accepted a hello it cannot have read");
    } catch (const sky::ProtocolError& e) {
        CHECK_THAT(e.what(), Catch::Contains("unreadable worker hello"));
    }
    CHECK(self_max_rss_kib() < 300 * 1024);
}

TEST_CASE("hostile frames from an authenticated worker lose the node with a typed error",
          "[local][auth]") {
    // The fake worker authenticates, says a proper hello, then answers every call with an
    // error frame whose message claims 3 GiB.
    sky::ComputePool pool{fake_spec("bad-error")};
    try {
        (void)(sky::compute<add>(1, 2) >> pool);
        FAIL("a call completed from an unreadable error frame");
    } catch (const sky::NodeLostError& e) {
        CHECK_THAT(e.what(), Catch::Contains("unreadable error frame"));
    }
    CHECK(self_max_rss_kib() < 300 * 1024);
}

TEST_CASE("a result that claims more than it holds is a ProtocolError for the caller",
          "[local][auth]") {
    sky::ComputePool pool{fake_spec("bad-result")};
    CHECK_THROWS_AS(sky::compute<concat>(std::string("a"), std::string("b"), 1) >> pool,
                    sky::ProtocolError);
    CHECK(self_max_rss_kib() < 300 * 1024);
}

TEST_CASE("the pool token never appears in what a real pool sends", "[local][auth]") {
    TempDir dir;
    const std::string wire_file = dir.path + "/wire";
    const std::string token_file = dir.path + "/token";
    {
        sky::ComputePool pool{fake_spec(
            "record", {{"SKY_E2E_WIRE_FILE", wire_file}, {"SKY_E2E_TOKEN_FILE", token_file}})};
        CHECK_THROWS_AS(sky::compute<add>(1, 2) >> pool, sky::RemoteError);
    }
    std::string token;
    for (int i = 0; i < 300 && (token.empty() || wire::read_file(wire_file).empty()); ++i) {
        std::this_thread::sleep_for(10ms);
        token = wire::read_file(token_file);
    }
    const std::string bytes = wire::read_file(wire_file);
    REQUIRE(token.size() == 32);
    REQUIRE(bytes.size() > 88);  // the answer, the hello, a call
    CHECK(bytes.find(token) == std::string::npos);
    CHECK(bytes.find(token.substr(0, 12)) == std::string::npos);
}

namespace e2e {

namespace {
// Reads exactly n bytes; false at the end of the stream.
bool read_exact(int fd, void* p, std::size_t n, std::string* log) {
    auto* c = static_cast<char*>(p);
    std::size_t got = 0;
    while (got < n) {
        ssize_t k = ::recv(fd, c + got, n - got, 0);
        if (k <= 0) return false;
        got += static_cast<std::size_t>(k);
    }
    if (log) log->append(c, n);
    return true;
}
void write_all(int fd, const d::Buffer& b) { (void)!::send(fd, b.data(), b.size(), MSG_NOSIGNAL); }
}  // namespace

int fake_worker(const char* mode_c) {
    const std::string mode = mode_c;
    const int fd = std::atoi(std::getenv("SKY_WORKER_FD"));
    const std::string token = std::getenv("SKY_WORKER_TOKEN");
    std::string heard;
    // The challenge.
    d::AuthBlock nw{}, nc{}, mac{};
    d::random_bytes(nw);
    d::Buffer p, out;
    p.append(nw.data(), 32);
    wire::frame(out, d::MsgType::auth, 0, p);
    write_all(fd, out);
    std::byte header[d::frame_header_size];
    if (!read_exact(fd, header, sizeof header, &heard) || !read_exact(fd, nc.data(), 32, &heard) ||
        !read_exact(fd, mac.data(), 32, &heard))
        return 1;
    d::AuthBlock proof = d::auth_mac(token, 'w', nc, nw);
    if (mode == "forged")
        d::random_bytes(proof);
    else if (!d::auth_equal(mac, d::auth_mac(token, 'c', nw, nc)))
        return 2;  // the real client always answers right
    p.clear();
    out.clear();
    p.append(proof.data(), 32);
    wire::frame(out, d::MsgType::auth, 0, p);
    p.clear();
    if (mode == "bomb") {
        std::uint32_t proto = d::protocol_version;
        std::uint64_t n = 3ull << 30;
        p.append(&proto, 4);
        p.append(&n, 8);
        p.append("abcd", 4);
    } else {
        d::WorkerHello wh;
        wh.build_id = d::self_build_id();
        for (auto& e : d::all_functions())
            wh.functions.emplace_back(std::string(e.name), e.signature);
        d::save_to(p, wh);
    }
    wire::frame(out, d::MsgType::hello, 0, p);
    if (mode != "bomb") {
        // Ready at once (one worker process, one port): the client waits for it after its hello.
        d::WorkerReady ready;
        ready.ports = {0};
        p.clear();
        d::save_to(p, ready);
        wire::frame(out, d::MsgType::ready, 0, p);
    }
    write_all(fd, out);
    // Then answer calls as the mode says, until the client goes away.
    for (;;) {
        if (!read_exact(fd, header, sizeof header, &heard)) break;
        d::FrameHeader h = d::decode_header(header, 1 << 20);
        std::string payload(h.length, '\0');
        if (!read_exact(fd, payload.data(), payload.size(), &heard)) break;
        if (h.type == d::MsgType::shutdown) break;
        if (h.type != d::MsgType::call) continue;
        d::Buffer reply, rp;
        if (mode == "bad-error") {
            std::uint8_t kind = 1;
            std::uint64_t n = 3ull << 30;
            rp.append(&kind, 1);
            rp.append(&n, 8);
            rp.append("xyz", 3);
            wire::frame(reply, d::MsgType::error, h.call_id, rp);
        } else if (mode == "bad-result") {
            std::uint64_t n = 3ull << 30;
            rp.append(&n, 8);
            rp.append("xyz", 3);
            wire::frame(reply, d::MsgType::result, h.call_id, rp);
        } else {
            d::ErrorMsg e{d::ErrorMsg::exception, "std::runtime_error", "fake worker", {}};
            d::save_to(rp, e);
            wire::frame(reply, d::MsgType::error, h.call_id, rp);
        }
        write_all(fd, reply);
    }
    if (mode == "record") {
        // What the client sent, then the token to compare with (written last: the test waits
        // for it).
        if (const char* w = std::getenv("SKY_E2E_WIRE_FILE")) {
            std::ofstream(w, std::ios::binary) << heard;
        }
        if (const char* t = std::getenv("SKY_E2E_TOKEN_FILE")) std::ofstream(t) << token;
    }
    return 0;
}

}  // namespace e2e
