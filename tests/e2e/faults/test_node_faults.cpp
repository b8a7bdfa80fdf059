// The node rows of the fault matrix (docs/faults.md), on sky::SSH pools over test hosts: sshd
// killed in the middle of a bootstrap, the host's link cut (its veth down) during a long call,
// and a worker frozen with SIGSTOP. Each must end in a typed error within its bound, the pool
// must go on with (or tear down) what is left, and nothing may be left running on the hosts.
#include <signal.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <mutex>
#include <thread>

#include "hosts/ssh_provider.hpp"
#include "hosts/test_hosts.hpp"
#include "sky/sky.hpp"

using namespace std::chrono_literals;
using sky::test::TestHosts;
using Clock = std::chrono::steady_clock;

namespace node_faults {

int sleep_ms(int ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    return sky::instance_info().node;
}
long worker_pid() { return static_cast<long>(::getpid()); }

sky::PoolSpec ssh_spec(const TestHosts& h, int nodes) {
    sky::SSH ssh = sky::test::ssh_provider(h);
    sky::PoolSpec spec{.provider = ssh, .nodes = nodes, .display = sky::Display::quiet};
    // Heartbeats every second; a node silent for 4 x 1 s + 5 s = 9 s is lost.
    spec.idle_timeout = 4s;
    spec.collect_metrics = false;
    return spec;
}

// The client declares a silent node lost after 4 heartbeats + 5 s; it notices within one more
// supervisor round, and the error travels back: 20 s is the bound asserted (13.5 s measured on
// a loaded 2-core machine).
constexpr auto kHeartbeatBound = 20s;
constexpr auto kLinkDownBound = 30s;

}  // namespace node_faults

using namespace node_faults;

TEST_CASE("node faults: sshd killed during a node's bootstrap is a typed error, nothing left",
          "[faults][node]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(2);
    auto spec = ssh_spec(hosts, 2);
    spec.image.setup = {"sleep 3"};  // a bootstrap that takes a while: the kill lands inside it
    std::atomic<bool> killed{false};
    std::promise<void> in_setup;
    std::once_flag once;
    spec.on_event = [&](const sky::Event& e) -> std::optional<sky::Event> {
        if (auto* p = std::get_if<sky::BootstrapProgress>(&e); p && p->step == "setup")
            std::call_once(once, [&] { in_setup.set_value(); });
        return std::nullopt;
    };
    auto setup_started = in_setup.get_future();
    std::thread killer([&] {
        if (setup_started.wait_for(60s) != std::future_status::ready) return;
        std::this_thread::sleep_for(500ms);
        hosts.kill_sshd(1);
        killed = true;
    });
    std::string outcome, message;
    const auto t0 = Clock::now();
    try {
        sky::ComputePool pool{spec};
        outcome = "started";
    } catch (const sky::BootstrapError& e) {
        outcome = "BootstrapError";
        message = e.what();
    } catch (const sky::NodeLostError& e) {
        outcome = "NodeLostError";
        message = e.what();
    } catch (const sky::ProvisionError& e) {
        outcome = "ProvisionError";
        message = e.what();
    } catch (const sky::Error& e) {
        outcome = "untyped sky::Error";
        message = e.what();
    }
    const auto took = Clock::now() - t0;
    killer.join();
    std::fprintf(stderr, "fault matrix: node x sshd killed in bootstrap: %s in %.1f s: %s\n",
                 outcome.c_str(), std::chrono::duration<double>(took).count(), message.c_str());
    INFO(outcome << ": " << message);
    REQUIRE(killed);
    // A node whose SSH server died cannot bootstrap: the pool does not start, with the typed
    // error of a bootstrap (or a lost node), within the bound (setup 3 s + the connection's end).
    CHECK((outcome == "BootstrapError" || outcome == "NodeLostError"));
    CHECK(took < 30s);
    // What host 0 started (its worker, its bootstrap) is ended.
    CHECK(sky::test::wait_until([] { return sky::test::remote_workers() == 0; }, 15s));
}

TEST_CASE(
    "node faults: a host's link cut during a long call is a NodeLostError within the "
    "heartbeat bound, and the other node's call completes",
    "[faults][node]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(2);
    auto t_pool = Clock::now();
    {
        sky::ComputePool pool{ssh_spec(hosts, 2)};
        std::vector<sky::Future<int>> calls;
        for (int i = 0; i < 2; ++i) calls.push_back(pool.submit(sky::compute<sleep_ms>(14000)));
        std::this_thread::sleep_for(1s);
        hosts.set_link_up(1, false);  // no FIN, no RST: the packets vanish
        const auto t0 = Clock::now();
        int lost = 0, ok = 0;
        std::chrono::steady_clock::duration lost_after{};
        // When each call ends, polled (get() in order would time one after the other).
        std::vector<Clock::time_point> ended(calls.size(), Clock::time_point::max());
        for (int i = 0; i < 600 && std::count(ended.begin(), ended.end(), Clock::time_point::max());
             ++i) {
            for (std::size_t c = 0; c < calls.size(); ++c)
                if (ended[c] == Clock::time_point::max() && calls[c].ready())
                    ended[c] = Clock::now();
            std::this_thread::sleep_for(100ms);
        }
        for (std::size_t c = 0; c < calls.size(); ++c) {
            auto& f = calls[c];
            try {
                const int node = f.get();  // outside CHECK: its exception is the outcome
                CHECK(node == 0);
                ++ok;
            } catch (const sky::NodeLostError& e) {
                lost_after = ended[c] - t0;
                INFO(e.what());
                CHECK(e.node() == 1);
                ++lost;
            }
        }
        std::fprintf(stderr,
                     "fault matrix: node x link down during a call: NodeLostError after %.1f s\n",
                     std::chrono::duration<double>(lost_after).count());
        CHECK(lost == 1);
        CHECK(ok == 1);
        // A cut link is noticed later than a frozen worker (20.0 s measured, against 13.5 s):
        // see docs/faults.md. The bound asserted is the one the pool keeps today.
        CHECK(lost_after < kLinkDownBound);
        // The pool goes on with node 0.
        CHECK((sky::compute<sleep_ms>(0) >> pool) == 0);
        t_pool = Clock::now();
    }
    // Teardown with an unreachable node is bounded too.
    const auto teardown = Clock::now() - t_pool;
    std::fprintf(stderr, "fault matrix: node x link down: teardown %.1f s\n",
                 std::chrono::duration<double>(teardown).count());
    CHECK(teardown < 45s);  // 27.7 s measured: see docs/faults.md
    // Back up: host 1's worker (cut off, its client gone) ends on its own watchdog.
    hosts.set_link_up(1, true);
    CHECK(sky::test::wait_until([] { return sky::test::remote_workers() == 0; }, 30s));
}

TEST_CASE(
    "node faults: a worker frozen with SIGSTOP on a host is declared lost within the "
    "heartbeat bound",
    "[faults][node]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(2);
    {
        sky::ComputePool pool{ssh_spec(hosts, 2)};
        const auto pids = sky::compute<worker_pid>() | pool;  // node order
        REQUIRE(pids.size() == 2);
        std::vector<sky::Future<int>> calls;
        for (int i = 0; i < 2; ++i) calls.push_back(pool.submit(sky::compute<sleep_ms>(14000)));
        std::this_thread::sleep_for(500ms);
        // The hosts share this machine's process ids: the worker of node 1 is pids[1] here.
        REQUIRE(::kill(static_cast<pid_t>(pids[1]), SIGSTOP) == 0);
        const auto t0 = Clock::now();
        int lost = 0;
        std::chrono::steady_clock::duration lost_after{};
        std::string what;
        for (auto& f : calls) {
            if (!f.wait_for(30s)) continue;
            try {
                (void)f.get();
            } catch (const sky::NodeLostError& e) {
                lost_after = Clock::now() - t0;
                what = e.what();
                CHECK(e.node() == 1);
                ++lost;
            }
        }
        std::fprintf(stderr, "fault matrix: node x worker frozen: NodeLostError after %.1f s: %s\n",
                     std::chrono::duration<double>(lost_after).count(), what.c_str());
        INFO(what);
        CHECK(lost == 1);
        CHECK(lost_after < kHeartbeatBound);
        // Either the client's heartbeat bound or the node's own watchdog (idle_timeout 4 s)
        // ending the frozen worker, whose tunnel then closes, comes first: both are seen here.
        CHECK((what.find("heartbeat") != std::string::npos ||
               what.find("tunnel to the worker closed") != std::string::npos));
    }
    // The frozen worker does not outlive the pool.
    CHECK(sky::test::wait_until([] { return sky::test::remote_workers() == 0; }, 20s));
}

// With the default bounds (idle_timeout 600 s: heartbeats every 3 s, a node silent for 10 s has
// its connection ended, then reconnect attempts; docs/faults.md, "A dropped connection"): a
// short cut is bridged, a long one and a frozen worker are still a NodeLostError within the
// 30 s of api.md.
namespace node_faults {

sky::PoolSpec default_spec(const TestHosts& h) {
    sky::SSH ssh = sky::test::ssh_provider(h);
    sky::PoolSpec spec{.provider = ssh, .nodes = 1, .display = sky::Display::quiet};
    spec.collect_metrics = false;
    return spec;
}

// How long the call takes to fail, and how.
struct Outcome {
    std::string what = "no error";
    double after_s = -1;
    bool lost = false;
};

Outcome outcome_of(sky::Future<int>& call, Clock::time_point t0) {
    Outcome o;
    if (!call.wait_for(90s)) {
        o.what = "still running after 90 s";
        return o;
    }
    o.after_s = std::chrono::duration<double>(Clock::now() - t0).count();
    try {
        (void)call.get();
        o.what = "completed";
    } catch (const sky::NodeLostError& e) {
        o.lost = true;
        o.what = e.what();
    } catch (const std::exception& e) {
        o.what = e.what();
    }
    return o;
}

}  // namespace node_faults

TEST_CASE(
    "node faults: with the default bounds a host's link cut for 5 s during a call is bridged: "
    "the call completes on the same node",
    "[faults][node][reconnect]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(1);
    sky::ComputePool pool{default_spec(hosts)};
    const auto pid = sky::compute<worker_pid>() >> pool;
    auto call = pool.submit(sky::compute<sleep_ms>(8000));
    std::this_thread::sleep_for(1s);
    hosts.set_link_up(0, false);
    const auto t0 = Clock::now();
    std::this_thread::sleep_for(5s);
    hosts.set_link_up(0, true);
    const auto o = outcome_of(call, t0);
    std::fprintf(stderr, "fault matrix: node x link down 5 s (default bounds): %s after %.1f s\n",
                 o.what.c_str(), o.after_s);
    INFO(o.what);
    CHECK(o.what == "completed");
    CHECK((sky::compute<worker_pid>() >> pool) == pid);  // the same worker: nothing replaced
}

TEST_CASE(
    "node faults: with the default bounds a host's link cut for good during a call is a "
    "NodeLostError within 30 s",
    "[faults][node][reconnect]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(1);
    Outcome o;
    {
        sky::ComputePool pool{default_spec(hosts)};
        auto call = pool.submit(sky::compute<sleep_ms>(120000));
        std::this_thread::sleep_for(1s);
        hosts.set_link_up(0, false);  // no FIN, no RST: the packets vanish
        o = outcome_of(call, Clock::now());
    }
    std::fprintf(stderr, "fault matrix: node x link down (default bounds): %s after %.1f s\n",
                 o.what.c_str(), o.after_s);
    INFO(o.what);
    CHECK(o.lost);
    CHECK(o.after_s < 30);
    hosts.set_link_up(0, true);
}

TEST_CASE(
    "node faults: with the default bounds a worker frozen with SIGSTOP is a NodeLostError "
    "within 30 s, whatever reconnecting finds",
    "[faults][node][reconnect]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(1);
    Outcome o;
    {
        sky::ComputePool pool{default_spec(hosts)};
        const auto pid = sky::compute<worker_pid>() >> pool;
        auto call = pool.submit(sky::compute<sleep_ms>(120000));
        std::this_thread::sleep_for(500ms);
        REQUIRE(::kill(static_cast<pid_t>(pid), SIGSTOP) == 0);
        o = outcome_of(call, Clock::now());
        ::kill(static_cast<pid_t>(pid), SIGKILL);
    }
    std::fprintf(stderr, "fault matrix: node x worker frozen (default bounds): %s after %.1f s\n",
                 o.what.c_str(), o.after_s);
    INFO(o.what);
    CHECK(o.lost);
    CHECK(o.after_s < 30);
}

TEST_CASE(
    "node faults: with the default bounds a host's link cut for 14.5 s during a call, long "
    "enough to be found silent, is resumed: the call completes on the same worker",
    "[faults][node][reconnect]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(1);
    auto spec = default_spec(hosts);
    std::mutex m;
    std::vector<std::string> notes;
    spec.on_event = [&](const sky::Event& e) -> std::optional<sky::Event> {
        if (auto* x = std::get_if<sky::ErrorEvent>(&e)) {
            std::lock_guard lk(m);
            notes.push_back(x->message);
        }
        return std::nullopt;
    };
    sky::ComputePool pool{spec};
    const auto pid = sky::compute<worker_pid>() >> pool;
    auto call = pool.submit(sky::compute<sleep_ms>(22000));
    std::this_thread::sleep_for(1s);
    // The first heartbeat after the cut is written within 3 s and answered no sooner than the
    // link is back: more than the 10 s silence bound, so the pool ends the connection and
    // reconnects once the link is up, within its 17 s window from that heartbeat.
    hosts.set_link_up(0, false);
    const auto t0 = Clock::now();
    std::this_thread::sleep_for(14500ms);
    hosts.set_link_up(0, true);
    const auto o = outcome_of(call, t0);
    std::string all;
    {
        std::lock_guard lk(m);
        for (auto& n : notes) all += n + "\n";
    }
    std::fprintf(stderr,
                 "fault matrix: node x link down 14.5 s (default bounds): %s after %.1f s\n%s",
                 o.what.c_str(), o.after_s, all.c_str());
    INFO(o.what << "\n" << all);
    CHECK(o.what == "completed");
    CHECK(all.find("reconnected to its worker") != std::string::npos);
    CHECK((sky::compute<worker_pid>() >> pool) == pid);  // the same worker: nothing replaced
}
