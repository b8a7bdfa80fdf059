// A dropped connection loses nothing (docs/faults.md, "A dropped connection"): on sky::SSH test
// hosts, the client's SSH connection is reset (ss -K, as a NAT or a flaky link does) while calls
// run, with the host's link up or down for a few seconds. The pool reconnects within its bound,
// the worker's kept answers arrive, and every call's result arrives once while every function
// runs once: each run appends a line to a file in the host's own /tmp, read back at the end.
#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "hosts/ssh_provider.hpp"
#include "hosts/test_hosts.hpp"
#include "sky/sky.hpp"
#include "support/run_log.hpp"

using sky::test::TestHosts;
using namespace std::chrono_literals;

namespace ssh_reconnect {

constexpr const char* kRunsFile = "/tmp/sky-reconnect-runs";

// Runs once per call: says so in the host's /tmp (one write, O_APPEND), then works for `ms`.
int record_run(int id, int ms) {
    sky::test::append_run(kRunsFile, id);
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    return id;
}

// What record_run wrote on this host: the id of each run, in order.
std::vector<int> runs_here() { return sky::test::runs_in(kRunsFile); }

// Resets every TCP connection from this (the root) namespace to host i's sshd: the client's SSH
// session dies at once; the host hears of it only when the RST reaches it.
void reset_connections(const TestHosts& h, int i) {
    auto r = sky::test::run_command(
        {"ss", "-K", "dst", h.address(i), "dport", "=", ":" + std::to_string(h.port(i))});
    INFO(r.output);
    REQUIRE(r.status == 0);
}

// The pool's events about reconnecting and losing nodes.
struct Notes {
    std::mutex m;
    std::vector<std::string> lines;
    bool has(const std::string& what) {
        std::lock_guard lk(m);
        for (auto& l : lines)
            if (l.find(what) != std::string::npos) return true;
        return false;
    }
    std::string all() {
        std::lock_guard lk(m);
        std::string s;
        for (auto& l : lines) s += l + "\n";
        return s;
    }
};

sky::PoolSpec spec_for(const TestHosts& h, Notes& notes) {
    sky::PoolSpec spec{.provider = sky::test::ssh_provider(h),
                       .nodes = 1,
                       .concurrency = 2,
                       .display = sky::Display::quiet};
    spec.on_event = [&notes](const sky::Event& e) -> std::optional<sky::Event> {
        if (auto* x = std::get_if<sky::ErrorEvent>(&e)) {
            std::lock_guard lk(notes.m);
            notes.lines.push_back(x->message);
        }
        if (std::holds_alternative<sky::InstanceReplaced>(e)) {
            std::lock_guard lk(notes.m);
            notes.lines.push_back("replaced");
        }
        return std::nullopt;
    };
    return spec;
}

// Submits `n` calls of `ms` each, runs `cut` while they run, and checks that each result
// arrived once and each function ran once on the host.
void calls_survive(sky::ComputePool& pool, Notes& notes, int n, int ms,
                   const std::function<void()>& cut, int ran_before = 0) {
    std::vector<sky::Future<int>> calls;
    for (int i = 0; i < n; ++i) calls.push_back(pool.submit(sky::compute<record_run>(i, ms)));
    std::this_thread::sleep_for(1s);  // the first two run, the others wait on the worker
    const auto t0 = std::chrono::steady_clock::now();
    cut();
    for (int i = 0; i < n; ++i) {
        INFO(notes.all());
        REQUIRE(calls[static_cast<std::size_t>(i)].wait_for(90s));
        CHECK(calls[static_cast<std::size_t>(i)].get() == i);
    }
    std::fprintf(stderr, "reconnect: %d calls of %d ms done %.1f s after the cut; events:\n%s", n,
                 ms, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                 notes.all().c_str());
    INFO(notes.all());
    CHECK(notes.has("reconnected to its worker"));
    CHECK_FALSE(notes.has("replaced"));
    CHECK_FALSE(notes.has(" lost: "));
    // Each function ran once, on the same worker (no replacement ran any again).
    std::map<int, int> runs;
    for (int id : sky::compute<runs_here>() >> pool) ++runs[id];
    CHECK(runs.size() == static_cast<std::size_t>(n + ran_before));
    for (auto [id, count] : runs) {
        INFO("call " << id);
        CHECK(count == 1);
    }
    CHECK(pool.instances().size() == 1);
}

}  // namespace ssh_reconnect

using namespace ssh_reconnect;

TEST_CASE(
    "ssh pool: the client's SSH connection reset during calls (link up) is resumed: each "
    "result once, each function once",
    "[ssh_pool][reconnect]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(1);
    Notes notes;
    sky::ComputePool pool{spec_for(hosts, notes)};
    // Answers received before the drop are acknowledged (with the next calls, or within the
    // supervisor's next second): the resumed worker does not send them again.
    for (int i = 0; i < 20; ++i) CHECK((sky::compute<record_run>(1000 + i, 0) >> pool) == 1000 + i);
    std::this_thread::sleep_for(2s);
    // Four 3-second calls on two slots: two run through the reset, two wait on the worker or
    // in the client, and the kept answers of those that end meanwhile come after the resume.
    calls_survive(
        pool, notes, 4, 3000, [&] { reset_connections(hosts, 0); }, 20);
    INFO(notes.all());
    CHECK(notes.has("(0 of them had arrived before the drop)"));
    // The pool goes on as before on the resumed connection.
    CHECK((sky::compute<record_run>(100, 0) >> pool) == 100);
}

TEST_CASE(
    "ssh pool: a host's link down for 4 s with the client's connection reset is resumed: "
    "each result once, each function once",
    "[ssh_pool][reconnect]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(1);
    Notes notes;
    sky::ComputePool pool{spec_for(hosts, notes)};
    // The reset is lost with the link: the host's sshd learns that its connection is gone only
    // when it writes to it again (an answer that ends meanwhile), and the client's reconnect
    // attempts fail until the link is back.
    calls_survive(pool, notes, 4, 6000, [&] {
        hosts.set_link_up(0, false);
        reset_connections(hosts, 0);
        std::this_thread::sleep_for(4s);
        hosts.set_link_up(0, true);
    });
}
