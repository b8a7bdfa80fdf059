// Never hang: a worker stops once its client goes quiet, even in the middle of a call; a
// client never waits on a pool that has no node left.
#include <sys/socket.h>

#include <catch2/catch.hpp>
#include <mutex>
#include <optional>
#include <thread>

#include "e2e/local/functions.hpp"
#include "e2e/local/wire.hpp"

using namespace e2e;
using namespace std::chrono_literals;
namespace d = sky::detail;
using Clock = std::chrono::steady_clock;

namespace {

// A worker on a socketpair, past its handshake with this hand-made client.
struct HandWorker {
    int sv[2] = {-1, -1};
    pid_t pid = -1;
    std::unique_ptr<d::FdTransport> t;
    std::unique_ptr<d::FrameReader> r;

    explicit HandWorker(std::int64_t idle_timeout_s) {
        REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
        pid = wire::spawn_worker({"SKY_WORKER_FD=3", "SKY_WORKER_TOKEN=tok"}, sv[1]);
        ::close(sv[1]);
        t = std::make_unique<d::FdTransport>(sv[0], "client");
        d::ClientHello ch;
        ch.idle_timeout_s = idle_timeout_s;
        wire::connect_client(*t, r, "tok", ch);
    }
    ~HandWorker() {
        if (pid > 0) (void)wire::wait_exit(pid, 0ms);  // kills it if a check failed first
    }
    void send(d::MsgType type, std::uint64_t id = 0) {
        d::Buffer out;
        wire::frame(out, type, id, {});
        wire::send(*t, out);
    }
    void call_sleep(std::uint64_t id, int ms) {
        d::Buffer out;
        wire::call_frame(out, id, sky::compute<sleep_ms>(ms).desc());
        wire::send(*t, out);
    }
    // The next frame that is not a log line or a "started", within `limit`.
    std::optional<d::Frame> next(std::chrono::milliseconds limit) {
        const auto until = Clock::now() + limit;
        for (int i = 0; i < 1000; ++i) {
            const auto left =
                std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
            if (left <= 0ms || (!r->has_buffered_frame() && !t->wait_readable(left))) return {};
            d::Frame f;
            if (!r->next(f)) return {};
            if (f.header.type != d::MsgType::log && f.header.type != d::MsgType::started) return f;
        }
        return {};
    }
    wire::Exit wait_exit(std::chrono::milliseconds within) {
        auto e = wire::wait_exit(pid, within);
        pid = -1;
        return e;
    }
};

}  // namespace

TEST_CASE("a worker answers heartbeats while its only slot runs a call", "[local][bounds]") {
    HandWorker w(3);
    w.call_sleep(1, 60000);
    // Six seconds, twice the idle timeout: the heartbeats keep the worker, and each is answered
    // though the one slot is busy.
    for (int i = 0; i < 12; ++i) {
        std::this_thread::sleep_for(500ms);
        w.send(d::MsgType::heartbeat);
        auto f = w.next(2s);
        REQUIRE(f);
        CHECK(f->header.type == d::MsgType::heartbeat);
    }
    CHECK(::kill(w.pid, 0) == 0);
    w.send(d::MsgType::shutdown);
    // A shutdown does not wait for the 60 s call nobody will read.
    auto e = w.wait_exit(5s);
    CHECK(e.exited);
}

TEST_CASE("a worker whose client goes quiet mid-call stops within its idle timeout",
          "[local][bounds]") {
    HandWorker w(2);
    w.call_sleep(1, 60000);
    const auto t0 = Clock::now();
    // The client stays connected but says nothing more (as when its machine froze or its link
    // was cut): the call in progress must not keep a rented node alive.
    auto e = w.wait_exit(15s);
    const auto took = Clock::now() - t0;
    REQUIRE(e.exited);
    CHECK(took >= 2s);
    CHECK(took < 6s);
}

TEST_CASE("a worker whose client vanishes mid-call exits at once", "[local][bounds]") {
    HandWorker w(600);
    w.call_sleep(1, 60000);
    std::this_thread::sleep_for(300ms);
    const auto t0 = Clock::now();
    w.t->shutdown();
    auto e = w.wait_exit(10s);
    REQUIRE(e.exited);
    CHECK(Clock::now() - t0 < 3s);
}

TEST_CASE("a long call on a one-slot pool outlives many heartbeat bounds", "[local][bounds]") {
    // idle_timeout 4 s: heartbeats every second, a node silent for 9 s is lost. The call takes
    // 12 s and must come back, with no node declared lost on the way.
    auto spec = quiet(1);
    spec.idle_timeout = 4s;
    sky::ComputePool pool{spec};
    std::vector<std::string> errors;
    std::mutex m;
    pool.on<sky::ErrorEvent>([&](const sky::ErrorEvent& e) {
        std::lock_guard lk(m);
        errors.push_back(e.message);
    });
    CHECK((sky::compute<sleep_ms>(12000) >> pool) == 12000);
    std::lock_guard lk(m);
    CHECK(errors.empty());
}

TEST_CASE("a call on a pool whose nodes all ended fails at once, naming why", "[local][bounds]") {
    auto spec = quiet(1);
    spec.timeout = 2s;  // the worker ends itself at its hard timeout; no replacement after it
    sky::ComputePool pool{spec};
    CHECK((sky::compute<add>(1, 1) >> pool) == 2);
    bool gone = false;
    for (int i = 0; i < 200 && !gone; ++i) {  // the worker ends at 2 s: wait up to 20 s
        gone = pool.instances().empty();
        if (!gone) std::this_thread::sleep_for(100ms);
    }
    REQUIRE(gone);
    const auto t0 = Clock::now();
    try {
        (void)(sky::compute<add>(1, 2) >> pool);
        FAIL("a call on a pool with no node returned");
    } catch (const sky::NodeLostError& e) {
        CHECK_THAT(e.what(), Catch::Contains("every node of the pool is lost"));
        CHECK_THAT(e.what(), Catch::Contains("timeout of 2 s"));
    }
    CHECK(Clock::now() - t0 < 1s);
    // A future too: ready at once with the same error.
    auto f = pool.submit(sky::compute<add>(1, 2));
    REQUIRE(f.wait_for(1s));
    CHECK_THROWS_AS(f.get(), sky::NodeLostError);
}
