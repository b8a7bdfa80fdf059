// Error paths on a real Local pool: remote exceptions, crashes, timeouts, retries, bad calls.
#include <signal.h>

#include <catch2/catch.hpp>
#include <mutex>
#include <thread>

#include "e2e/local/functions.hpp"

using namespace e2e;

TEST_CASE("a remote exception is a RemoteError with everything known about it", "[local][errors]") {
    sky::ComputePool pool{quiet(2)};
    try {
        sky::compute<throw_invalid>(7) >> pool;
        FAIL("no exception");
    } catch (const sky::RemoteError& e) {
        CHECK(e.function() == "e2e::throw_invalid");
        CHECK(e.type_name() == "std::invalid_argument");
        CHECK(e.message() == "bad x: 7");
        CHECK((e.node() == 0 || e.node() == 1));
        CHECK(e.instance_id() == pool.instances()[static_cast<std::size_t>(e.node())].id);
        REQUIRE_FALSE(e.remote_log().empty());
        CHECK(e.remote_log().back() == "about to fail with 7");
        CHECK(std::string(e.what()).find("bad x: 7") != std::string::npos);
    }
    CHECK_THROWS_WITH(sky::compute<throw_custom>(1) >> pool, Catch::Contains("e2e::CustomError"));
    CHECK_THROWS_WITH(sky::compute<throw_int>(1) >> pool, Catch::Contains("int"));
    // The pool is fine afterwards.
    CHECK((sky::compute<add>(1, 2) >> pool) == 3);
}

TEST_CASE("in a batch the first failure is rethrown after the others finish", "[local][errors]") {
    sky::ComputePool pool{quiet(2)};
    auto slow = sky::compute<sleep_ms>(200);
    auto t0 = std::chrono::steady_clock::now();
    CHECK_THROWS_AS((sky::compute<throw_invalid>(1) & slow) >> pool, sky::RemoteError);
    CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(190));
    // submit lets a caller take each one separately.
    auto ok = pool.submit(sky::compute<add>(1, 1));
    auto bad = pool.submit(sky::compute<throw_invalid>(2));
    CHECK(ok.get() == 2);
    CHECK_THROWS_AS(bad.get(), sky::RemoteError);
}

TEST_CASE("a call that aborts or segfaults fails with NodeLostError, the pool goes on",
          "[local][errors]") {
    sky::ComputePool pool{quiet(2)};
    std::vector<std::string> errors;
    pool.on<sky::ErrorEvent>([&](const sky::ErrorEvent& e) { errors.push_back(e.message); });
    try {
        sky::compute<crash_abort>(1) >> pool;
        FAIL("no exception");
    } catch (const sky::NodeLostError& e) {
        CHECK(e.reason() == sky::NodeLostError::Reason::worker_crashed);
        CHECK(std::string(e.what()).find("signal 6") != std::string::npos);
    }
    CHECK_THROWS_WITH(sky::compute<crash_segv>(1) >> pool, Catch::Contains("signal 11"));
    // Other calls go on, and the lost nodes come back.
    std::vector<sky::PendingCompute<int>> calls;
    for (int i = 0; i < 50; ++i) calls.push_back(sky::compute<add>(i, 0));
    auto out = sky::gather(std::move(calls)) >> pool;
    CHECK(out.size() == 50);
    for (int k = 0; k < 200 && pool.instance_count() < 2; ++k)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    CHECK(pool.instance_count() == 2);
    CHECK((sky::compute<node_index>() | pool) == std::vector<int>{0, 1});
}

TEST_CASE("a crash in a batch fails only its own call", "[local][errors]") {
    sky::ComputePool pool{quiet(2, 2)};
    auto crash = pool.submit(sky::compute<crash_abort>(0));
    std::vector<sky::Future<int>> others;
    for (int i = 0; i < 20; ++i) others.push_back(pool.submit(sky::compute<sleep_ms>(5)));
    CHECK_THROWS_AS(crash.get(), sky::NodeLostError);
    int ok = 0;
    for (auto& f : others) {
        try {
            f.get();
            ++ok;
        } catch (const sky::NodeLostError&) {
            // a call that shared the crashed worker is lost with it (no retries asked)
        }
    }
    CHECK(ok >= 10);
}

TEST_CASE("retries re-run a call on another node when its node is lost", "[local][errors]") {
    sky::ComputePool pool{quiet(2)};
    std::mutex m;
    int node0_lost = 0;
    pool.on<sky::ErrorEvent>([&](const sky::ErrorEvent& e) {
        std::lock_guard lk(m);
        if (e.message.rfind("node 0 lost", 0) == 0) ++node0_lost;
    });
    // Node 0 aborts, node 1 answers. Eight calls at once on two nodes: some go to node 0 first,
    // are lost with it, and are re-run on node 1 (never on node 0's replacement, which would
    // abort them again and use up their retries).
    std::vector<sky::PendingCompute<int>> calls;
    for (int i = 0; i < 8; ++i) calls.push_back(sky::compute<fail_on_node>(0).retries(1));
    std::vector<int> got = sky::gather(calls) >> pool;
    CHECK(got == std::vector<int>(8, 1));
    // A retry really happened (events are delivered on their own thread: wait a little).
    bool seen = false;
    for (int i = 0; i < 50 && !seen; ++i) {
        {
            std::lock_guard lk(m);
            seen = node0_lost >= 1;
        }
        if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    CHECK(seen);
    // Never re-run because the function threw.
    CHECK_THROWS_AS(sky::compute<throw_invalid>(1).retries(3) >> pool, sky::RemoteError);
}

TEST_CASE("a call past its timeout fails with TimeoutError", "[local][errors]") {
    sky::ComputePool pool{quiet(1, 2)};
    auto t0 = std::chrono::steady_clock::now();
    CHECK_THROWS_AS(sky::compute<sleep_ms>(3000).timeout(std::chrono::milliseconds(200)) >> pool,
                    sky::TimeoutError);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(2500));
    CHECK((sky::compute<sleep_ms>(10).timeout(std::chrono::seconds(5)) >> pool) == 10);
}

TEST_CASE("an unknown function or a signature mismatch is a RemoteError, not a crash",
          "[local][errors]") {
    sky::ComputePool pool{quiet(1)};
    auto real = sky::compute<add>(1, 2);
    sky::detail::CallDesc d = real.desc();
    d.owned_name = std::make_shared<const std::string>("no::such_function");
    d.function = *d.owned_name;
    CHECK_THROWS_WITH(sky::PendingCompute<int>(d) >> pool, Catch::Contains("no function named"));
    sky::detail::CallDesc s = real.desc();
    s.signature ^= 1;
    CHECK_THROWS_WITH(sky::PendingCompute<int>(s) >> pool, Catch::Contains("another signature"));
    sky::detail::CallDesc g = real.desc();
    auto garbage = std::make_shared<sky::detail::Buffer>();
    garbage->append("x", 1);
    g.args = garbage;
    CHECK_THROWS_AS(sky::PendingCompute<int>(g) >> pool, sky::RemoteError);
    CHECK((real >> pool) == 3);
}

TEST_CASE("bad options are ConfigErrors and nothing starts", "[local][errors]") {
    CHECK_THROWS_AS(sky::ComputePool({.nodes = 0}), sky::ConfigError);
    CHECK_THROWS_AS(sky::ComputePool({.concurrency = -1}), sky::ConfigError);
    CHECK_THROWS_WITH(sky::ComputePool({.provider = sky::SSH{}}),
                      Catch::Contains("needs at least one host"));
    CHECK_THROWS_WITH(sky::ComputePool({.provider = sky::VastAI{.min_reliability = 2}}),
                      Catch::Contains("min_reliability"));
    CHECK_THROWS_AS(sky::ComputePool({.spot = "sometimes"}), sky::ConfigError);
    CHECK_THROWS_AS(sky::ComputePool({.accelerator = "NoSuchGPU"}), sky::ConfigError);
}

TEST_CASE("a frozen worker is declared lost within the heartbeat bound, and its node replaced",
          "[local][errors]") {
    // idle_timeout 4 s: heartbeats every second, a node silent for 4 × 1 s + 5 s is lost.
    auto spec = quiet(1);
    spec.idle_timeout = std::chrono::seconds(4);
    sky::ComputePool pool{spec};
    const long frozen = sky::compute<pid>() >> pool;
    auto call = pool.submit(sky::compute<sleep_ms>(60000));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    REQUIRE(::kill(static_cast<pid_t>(frozen), SIGSTOP) == 0);
    const auto t0 = std::chrono::steady_clock::now();
    REQUIRE(call.wait_for(std::chrono::seconds(30)));
    const auto waited = std::chrono::steady_clock::now() - t0;
    try {
        (void)call.get();
        FAIL("the call outlived its frozen worker");
    } catch (const sky::NodeLostError& e) {
        CHECK(std::string(e.what()).find("heartbeat") != std::string::npos);
    }
    CHECK(waited < std::chrono::seconds(15));
    // The node is back with a fresh worker; the frozen one is gone.
    const long fresh = sky::compute<pid>() >> pool;
    CHECK(fresh != frozen);
    CHECK(::kill(static_cast<pid_t>(frozen), 0) != 0);
}
