// The pool's node connection (pool/node_connection.hpp) on the I/O core, against a scripted worker
// over a socket pair: the worker side authenticates with the real code, then plays exactly what a
// test gives it. The handshake's rules and bounds without a blocked thread, frames split anywhere
// (and one larger than the read buffer), writes from many threads, the end of the stream, and the
// silence clock of heartbeats.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "io/fd_stream.hpp"
#include "io/sealed.hpp"
#include "pool/node_connection.hpp"
#include "runtime/auth.hpp"
#include "runtime/fd_transport.hpp"
#include "runtime/protocol.hpp"
#include "sky/detail/serialize.hpp"
#include "sky/errors.hpp"

using namespace sky::detail;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

const std::string token = "a token of thirty-two characters!";

/// What the connection reported, guarded: its callbacks run on an I/O thread.
struct Seen {
    std::mutex m;
    std::condition_variable cv;
    std::optional<std::string> error;  ///< the handshake's, if it failed
    std::optional<WorkerReady> ready;
    std::vector<Incoming> frames;
    int batches = 0;
    std::optional<std::string> ended;
    bool protocol = false;  ///< the end was a protocol error
    int ends = 0;

    template <class Pred>
    bool wait(Pred pred, std::chrono::seconds limit = 20s) {
        std::unique_lock lk(m);
        return cv.wait_for(lk, limit, pred);
    }
};

/// A worker on a thread of its own: it authenticates, runs `script`, then waits until the client
/// end closes (so the client, not the script's end, decides when the stream ends) unless the
/// script closes first.
class ScriptedWorker {
public:
    using Script = std::function<void(FdTransport&, FrameReader&)>;

    explicit ScriptedWorker(Script script) {
        int sv[2];
        REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
        conn = std::make_shared<NodeConnection>(std::make_unique<io::FdStream>(sv[0], "client end"),
                                                "node 0 (test)");
        thread_ = std::thread([this, fd = sv[1], script = std::move(script)] {
            const int authed = worker_authenticate(-1, fd, token, Clock::now() + 10s, 10s,
                                                   [](const std::string&) {});
            if (authed < 0) return;
            FdTransport t(authed, "worker end");
            FrameReader frames(t, 64u << 20);
            try {
                script(t, frames);
            } catch (const std::exception&) {
            }
        });
    }
    ~ScriptedWorker() {
        conn->close();
        if (thread_.joinable()) thread_.join();
        // The test's Seen goes after this: no callback may reach it then.
        const auto until = Clock::now() + 10s;
        while (conn.use_count() > 1 && Clock::now() < until) std::this_thread::sleep_for(1ms);
    }

    /// Starts the connection with `h`, recording into `seen`.
    void start(Seen& seen, ClientChannel::Handshake h) {
        conn->start(
            std::move(h),
            [&seen](std::exception_ptr e, WorkerReady r) {
                std::lock_guard lk(seen.m);
                if (e) {
                    try {
                        std::rethrow_exception(e);
                    } catch (const std::exception& x) {
                        seen.error = x.what();
                    }
                } else {
                    seen.ready = r;
                }
                seen.cv.notify_all();
            },
            [&seen](std::vector<Incoming>& frames) {
                std::lock_guard lk(seen.m);
                ++seen.batches;
                for (auto& f : frames) seen.frames.push_back(std::move(f));
                seen.cv.notify_all();
            },
            [&seen](const std::string& why, bool protocol) {
                std::lock_guard lk(seen.m);
                seen.ended = why;
                seen.protocol = protocol;
                ++seen.ends;
                seen.cv.notify_all();
            });
    }

    std::shared_ptr<NodeConnection> conn;

private:
    std::thread thread_;
};

/// After close(): waits (bounded) until no handler of the I/O core holds `conn` any more, so that
/// no callback of it runs once the test's records of it are gone (close() lets the reader see
/// the end, and the ended callback may run after it returns).
void wait_quiet(const std::shared_ptr<NodeConnection>& conn) {
    const auto until = Clock::now() + 10s;
    while (conn.use_count() > 1 && Clock::now() < until) std::this_thread::sleep_for(1ms);
    REQUIRE(conn.use_count() == 1);
}

ClientChannel::Handshake handshake_with(std::chrono::seconds hello, std::chrono::seconds ready) {
    return {.token = token, .hello_bound = hello, .ready_bound = ready};
}

void send(FdTransport& t, const Buffer& b) {
    std::span<const std::byte> one[] = {b.span()};
    t.write_all(one);
}

/// The worker's side of a good handshake: its hello, the client's hello read, ready.
bool greet(FdTransport& t, FrameReader& frames) {
    WorkerHello wh;
    wh.build_id = self_build_id();
    Buffer p, out;
    save_to(p, wh);
    append_frame(out, MsgType::hello, 0, p.span());
    send(t, out);
    Frame f;
    if (!frames.next(f) || f.header.type != MsgType::hello) return false;
    WorkerReady r;
    r.workers = 1;
    r.ports = {4242};
    Buffer q, ready;
    save_to(q, r);
    append_frame(ready, MsgType::ready, 0, q.span());
    send(t, ready);
    return true;
}

/// Waits until the client's end closes (reads and drops what it sends).
void drain(FrameReader& frames) {
    Frame f;
    try {
        while (frames.next(f)) {
        }
    } catch (const std::exception&) {
    }
}

Buffer pattern(std::size_t n, int seed) {
    Buffer b;
    b.resize(n);
    for (std::size_t i = 0; i < n; ++i) b.data()[i] = std::byte((i * 131 + seed) % 251);
    return b;
}

}  // namespace

TEST_CASE("node connection: a silent worker fails the handshake at its bound, no thread waits",
          "[node_connection]") {
    ScriptedWorker w([](FdTransport&, FrameReader& frames) { drain(frames); });
    Seen seen;
    const auto t0 = Clock::now();
    w.start(seen, handshake_with(1s, 5s));
    REQUIRE(seen.wait([&] { return seen.error || seen.ready; }));
    REQUIRE(seen.error);
    CHECK_THAT(*seen.error, Catch::Contains("node 0 (test): no hello from the worker within 1 s"));
    CHECK(Clock::now() - t0 < 4s);
    CHECK(seen.ends == 0);  // a failed handshake is reported once, as the handshake's error
}

TEST_CASE("node connection: a worker of another build is a ProtocolError naming it",
          "[node_connection]") {
    ScriptedWorker w([](FdTransport& t, FrameReader& frames) {
        WorkerHello wh;
        wh.build_id = "not-this-build";
        Buffer p, out;
        save_to(p, wh);
        append_frame(out, MsgType::hello, 0, p.span());
        send(t, out);
        drain(frames);
    });
    Seen seen;
    w.start(seen, handshake_with(5s, 5s));
    REQUIRE(seen.wait([&] { return seen.error || seen.ready; }));
    REQUIRE(seen.error);
    CHECK_THAT(*seen.error, Catch::Contains("different build of the program"));
}

TEST_CASE(
    "node connection: frames split anywhere, one larger than a read, arrive whole and in "
    "order, then the end once",
    "[node_connection]") {
    const std::vector<std::size_t> sizes = {10, 5u << 20, 0, 100, (9u << 20) + 7, 3};
    ScriptedWorker w([&](FdTransport& t, FrameReader& frames) {
        if (!greet(t, frames)) return;
        Buffer all;
        for (std::size_t i = 0; i < sizes.size(); ++i) {
            Buffer p = pattern(sizes[i], static_cast<int>(i));
            append_frame(all, MsgType::result, i + 1, p.span());
        }
        // Written in pieces of odd sizes, so that frames and headers straddle reads.
        std::size_t off = 0, piece = 1;
        while (off < all.size()) {
            const std::size_t n = std::min(piece, all.size() - off);
            std::span<const std::byte> one[] = {{all.data() + off, n}};
            t.write_all(one);
            off += n;
            piece = piece * 7 % 100'003 + 1;
        }
        // The worker ends the stream itself.
    });
    Seen seen;
    w.start(seen, handshake_with(5s, 5s));
    REQUIRE(seen.wait([&] { return seen.ended.has_value() || seen.error.has_value(); }));
    std::lock_guard lk(seen.m);
    CHECK_FALSE(seen.error);
    REQUIRE(seen.ready);
    CHECK(seen.ready->ports == std::vector<std::int32_t>{4242});
    REQUIRE(seen.frames.size() == sizes.size());
    for (std::size_t i = 0; i < sizes.size(); ++i) {
        INFO("frame " << i);
        CHECK(seen.frames[i].type == MsgType::result);
        CHECK(seen.frames[i].call_id == i + 1);
        const Buffer want = pattern(sizes[i], static_cast<int>(i));
        REQUIRE(seen.frames[i].payload.size() == want.size());
        CHECK(std::equal(want.span().begin(), want.span().end(),
                         seen.frames[i].payload.span().begin()));
    }
    CHECK(seen.ends == 1);
    CHECK(*seen.ended == "the worker closed the connection");
}

TEST_CASE("node connection: writes from many threads go out whole, each thread's in order",
          "[node_connection]") {
    constexpr int writers = 8, per_writer = 500;
    std::map<int, std::vector<std::uint64_t>> got;  // writer -> call ids, as the worker read them
    std::atomic<bool> clean{true};
    std::promise<void> all_read;
    ScriptedWorker w([&](FdTransport& t, FrameReader& frames) {
        if (!greet(t, frames)) return;
        Frame f;
        int n = 0;
        try {
            while (n < writers * per_writer && frames.next(f)) {
                if (f.header.type != MsgType::call) continue;
                const auto c = decode_call(f.payload);
                const int writer = static_cast<int>(f.header.call_id >> 32);
                // Each call carries its own id in its argument bytes: a torn frame shows here.
                std::uint64_t echo = 0;
                if (c.args.size() != 4096 + 8) clean = false;
                std::memcpy(&echo, c.args.data(), 8);
                if (echo != f.header.call_id) clean = false;
                got[writer].push_back(f.header.call_id & 0xffffffff);
                ++n;
            }
        } catch (const std::exception&) {
            clean = false;
        }
        all_read.set_value();
        drain(frames);
    });
    Seen seen;
    w.start(seen, handshake_with(5s, 5s));
    REQUIRE(seen.wait([&] { return seen.ready.has_value() || seen.error.has_value(); }));
    REQUIRE(seen.ready);
    std::vector<std::thread> threads;
    for (int k = 0; k < writers; ++k)
        threads.emplace_back([&, k] {
            for (int i = 0; i < per_writer; ++i) {
                const std::uint64_t id = (std::uint64_t(k) << 32) | std::uint64_t(i);
                auto args = std::make_shared<Buffer>(pattern(4096 + 8, k));
                std::memcpy(args->data(), &id, 8);
                CallDesc c;
                c.function = "test::f";
                c.args = args;
                Outgoing o;
                encode_call(o, id, c, -1);
                w.conn->write(std::move(o));
            }
        });
    for (auto& t : threads) t.join();
    auto done = all_read.get_future();
    REQUIRE(done.wait_for(30s) == std::future_status::ready);
    CHECK(clean);
    REQUIRE(got.size() == writers);
    for (auto& [k, ids] : got) {
        INFO("writer " << k);
        REQUIRE(ids.size() == per_writer);
        for (int i = 0; i < per_writer; ++i)
            CHECK(ids[static_cast<std::size_t>(i)] == std::uint64_t(i));
    }
}

TEST_CASE("node connection: a written heartbeat waits for any byte back from the worker",
          "[node_connection]") {
    std::promise<void> answer;
    auto answer_now = answer.get_future();
    ScriptedWorker w([&](FdTransport& t, FrameReader& frames) {
        if (!greet(t, frames)) return;
        Frame f;
        if (!frames.next(f) || f.header.type != MsgType::heartbeat) return;
        answer_now.wait_for(20s);  // silent until the test says so
        Buffer hb;
        append_frame(hb, MsgType::heartbeat, 0, {});
        send(t, hb);
        drain(frames);
    });
    Seen seen;
    w.start(seen, handshake_with(5s, 5s));
    REQUIRE(seen.wait([&] { return seen.ready.has_value() || seen.error.has_value(); }));
    REQUIRE(seen.ready);
    CHECK(w.conn->unanswered(Clock::now()) == Clock::duration::zero());
    w.conn->heartbeat();
    std::this_thread::sleep_for(300ms);
    CHECK(w.conn->unanswered(Clock::now()) >= 250ms);
    answer.set_value();
    REQUIRE(seen.wait([&] { return !seen.frames.empty(); }));
    CHECK(w.conn->unanswered(Clock::now()) == Clock::duration::zero());
}

namespace {

/// A sealing worker over a socket pair: the real sealing handshake, its hello and ready sealed,
/// one result, then (with `tamper`) a record that is not the worker's (a bit changed on the
/// wire) written on the raw socket.
void sealed_worker(int fd, bool tamper) {
    std::optional<io::SealKeys> keys;
    const int authed = worker_authenticate(
        -1, fd, token, Clock::now() + 10s, 10s, [](const std::string&) {}, {}, &keys);
    if (authed < 0 || !keys) return;
    const int raw = ::dup(authed);
    io::SealedTransport t(std::make_unique<FdTransport>(authed, "worker end"), *keys);
    FrameReader frames(t, 64u << 20);
    auto put = [&](const Buffer& b) {
        std::span<const std::byte> one[] = {b.span()};
        t.write_all(one);
    };
    WorkerHello wh;
    wh.build_id = self_build_id();
    Buffer p, out;
    save_to(p, wh);
    append_frame(out, MsgType::hello, 0, p.span());
    put(out);
    Frame f;
    if (!frames.next(f) || f.header.type != MsgType::hello) return;
    WorkerReady r;
    r.workers = 1;
    r.ports = {4242};
    Buffer q, ready, result;
    save_to(q, r);
    append_frame(ready, MsgType::ready, 0, q.span());
    put(ready);
    const Buffer payload = pattern(1u << 20, 3);
    append_frame(result, MsgType::result, 7, payload.span());
    put(result);
    if (tamper) {
        io::RecordSealer other(keys->open);  // a key that is not this direction's
        std::vector<std::byte> rec;
        const Buffer heartbeat = [] {
            Buffer b;
            append_frame(b, MsgType::heartbeat, 0, {});
            return b;
        }();
        other.seal(heartbeat.span(), rec);
        (void)::send(raw, rec.data(), rec.size(), MSG_NOSIGNAL);
    }
    try {
        while (frames.next(f)) {
        }
    } catch (const std::exception&) {
    }
    ::close(raw);
}

}  // namespace

TEST_CASE(
    "node connection: a sealing worker's frames arrive sealed, and a record that is not the "
    "worker's ends the connection with a protocol error",
    "[node_connection][seal]") {
    for (const bool tamper : {false, true}) {
        int sv[2];
        REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
        auto conn = std::make_shared<NodeConnection>(
            std::make_unique<io::FdStream>(sv[0], "client end"), "node 0 (test)");
        std::thread worker([fd = sv[1], tamper] { sealed_worker(fd, tamper); });
        Seen seen;
        auto h = handshake_with(5s, 5s);
        h.seal = true;
        conn->start(
            std::move(h),
            [&seen](std::exception_ptr e, WorkerReady r) {
                std::lock_guard lk(seen.m);
                if (e) {
                    try {
                        std::rethrow_exception(e);
                    } catch (const std::exception& x) {
                        seen.error = x.what();
                    }
                } else {
                    seen.ready = r;
                }
                seen.cv.notify_all();
            },
            [&seen](std::vector<Incoming>& frames) {
                std::lock_guard lk(seen.m);
                for (auto& f : frames) seen.frames.push_back(std::move(f));
                seen.cv.notify_all();
            },
            [&seen](const std::string& why, bool protocol) {
                std::lock_guard lk(seen.m);
                seen.ended = why;
                seen.protocol = protocol;
                ++seen.ends;
                seen.cv.notify_all();
            });
        INFO("tamper " << tamper);
        REQUIRE(seen.wait([&] { return seen.error || seen.ready; }));
        CHECK_FALSE(seen.error);
        REQUIRE(seen.wait([&] { return !seen.frames.empty(); }));
        {
            std::lock_guard lk(seen.m);
            REQUIRE(seen.frames.front().type == MsgType::result);
            CHECK(seen.frames.front().payload.size() == 1u << 20);
            CHECK(std::memcmp(seen.frames.front().payload.data(), pattern(1u << 20, 3).data(),
                              1u << 20) == 0);
        }
        if (tamper) {
            REQUIRE(seen.wait([&] { return seen.ended.has_value(); }));
            std::lock_guard lk(seen.m);
            CHECK(seen.protocol);
            CHECK_THAT(*seen.ended, Catch::Contains("failed authentication"));
        } else {
            std::this_thread::sleep_for(200ms);
            std::lock_guard lk(seen.m);
            CHECK_FALSE(seen.ended);
        }
        conn->close();
        worker.join();
        // This round's Seen ends with the round: the connection's late end (close() lets the
        // reader see it) must not land in the next round's, at the same address.
        wait_quiet(conn);
    }
}
