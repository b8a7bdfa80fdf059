// An elastic pool's decision (pool/autoscale.hpp) in tables, without a pool, threads or clocks of
// its own: the demand it counts, the target, how many start at once, which nodes end and when.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <set>
#include <string>
#include <vector>

#include "pool/autoscale.hpp"
#include "support/source_scan.hpp"

using namespace sky::detail;
using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

namespace {
const auto t0 = SteadyClock::time_point{} + 1000h;

ScaleNode node(int index, std::size_t calls = 0, SteadyClock::time_point idle_since = t0,
               SteadyClock::time_point started_at = t0) {
    ScaleNode n;
    n.index = index;
    n.calls = calls;
    n.idle_since = idle_since;
    n.started_at = started_at;
    return n;
}

ScaleInput input(int min, int max, std::size_t waiting, std::size_t in_flight = 0,
                 std::size_t pinned = 0) {
    ScaleInput in;
    in.bounds = {min, max, 60s};
    in.waiting = waiting;
    in.in_flight = in_flight;
    in.pinned = pinned;
    return in;
}

/// Applies a decision: started nodes are there (starting), ended ones gone.
void apply(ScaleInput& in, const ScaleDecision& d, SteadyClock::time_point now) {
    for (int i : d.start) {
        auto n = node(i, 0, now, now);
        n.starting = true;
        in.nodes.push_back(n);
    }
    std::erase_if(in.nodes, [&](const ScaleNode& n) {
        return std::find(d.end.begin(), d.end.end(), n.index) != d.end.end();
    });
}
}  // namespace

TEST_CASE("autoscale: the target is clamp(ceil(demand / capacity), min, max)", "[autoscale]") {
    struct Row {
        int min, max;
        std::size_t waiting, in_flight, pinned, capacity;
        int target;
    };
    const Row rows[] = {
        {0, 8, 0, 0, 0, 1, 0},    // nothing to do: min
        {2, 8, 0, 0, 0, 1, 2},    // min holds
        {0, 8, 1, 0, 0, 1, 1},    // one call wakes one node
        {0, 8, 0, 1, 0, 1, 1},    // running calls count
        {0, 8, 0, 0, 1, 1, 1},    // pinned calls count
        {0, 8, 3, 2, 0, 2, 3},    // ceil(5 / 2)
        {0, 8, 100, 0, 0, 1, 8},  // max holds
        {0, 8, 1, 0, 0, 4, 1},    // demand > 0 never yields 0, whatever the capacity
        {0, 8, 16, 0, 0, 4, 4},   // exactly
        {3, 3, 100, 0, 0, 1, 3},  // fixed
        {0, 8, 5, 0, 0, 0, 5},    // a capacity of 0 counts as 1
    };
    for (const auto& r : rows) {
        auto in = input(r.min, r.max, r.waiting, r.in_flight, r.pinned);
        in.capacity = r.capacity;
        INFO("min " << r.min << " max " << r.max << " demand " << scale_demand(in) << " capacity "
                    << r.capacity);
        CHECK(scale_demand(in) == r.waiting + r.in_flight + r.pinned);
        CHECK(scale_target(in) == r.target);
    }
}

TEST_CASE("autoscale: demand > 0 never yields 0 nodes", "[autoscale]") {
    for (std::size_t demand = 1; demand < 50; ++demand)
        for (std::size_t capacity = 1; capacity < 10; ++capacity)
            for (int max = 1; max < 5; ++max) {
                auto in = input(0, max, demand);
                in.capacity = capacity;
                // Every node idle for ever: still one stays.
                in.nodes = {node(0, 0, t0 - 1h), node(1, 0, t0 - 1h)};
                const auto d = decide_scale(in, t0);
                CHECK(d.target >= 1);
                CHECK(static_cast<int>(in.nodes.size() - d.end.size() + d.start.size()) >= 1);
            }
}

TEST_CASE("autoscale: a burst of 100 one-slot calls on max = 8 starts 8 at once and stays 8",
          "[autoscale]") {
    auto in = input(0, 8, 100);
    auto d = decide_scale(in, t0);
    CHECK(d.target == 8);
    CHECK(d.start == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
    CHECK(d.end.empty());
    apply(in, d, t0);
    // Starting nodes count as there: nothing more starts while they come up.
    CHECK(decide_scale(in, t0 + 1s).start.empty());
    for (auto& n : in.nodes) n.starting = false;
    // Calls move from waiting to running, 8 at a time, each running a second: 8 nodes stay.
    std::size_t waiting = 100;
    auto now = t0;
    for (int step = 1; waiting > 0; ++step) {
        now = t0 + std::chrono::seconds(step);
        const std::size_t running = std::min<std::size_t>(waiting, 8);
        waiting -= running;
        in.waiting = waiting;
        in.in_flight = running;
        for (std::size_t k = 0; k < in.nodes.size(); ++k) {
            in.nodes[k].calls = k < running ? 1 : 0;
            if (k >= running) in.nodes[k].idle_since = now;  // just finished its call
        }
        d = decide_scale(in, now);
        INFO("waiting " << waiting << " running " << running);
        CHECK(d.start.empty());
        CHECK(d.end.empty());  // never a busy node, and idle ones not for a whole window yet
    }
    // Done: a window later every node goes, node 0 last.
    in.in_flight = 0;
    for (auto& n : in.nodes) {
        n.calls = 0;
        n.idle_since = now;
    }
    CHECK(decide_scale(in, now + 59s).end.empty());
    d = decide_scale(in, now + 60s);
    CHECK(d.target == 0);
    REQUIRE(d.end.size() == 8);
    CHECK(d.end.back() == 0);
}

TEST_CASE("autoscale: scale-down takes idle nodes only, after the window, newest first",
          "[autoscale]") {
    auto in = input(0, 8, 0);
    // Four nodes; 3 is the newest; 2 is busy; 1 has been idle for less than the window.
    in.nodes = {node(0, 0, t0 - 2min, t0 - 10min), node(1, 0, t0 - 30s, t0 - 9min),
                node(2, 3, t0, t0 - 8min), node(3, 0, t0 - 2min, t0 - 1min)};
    in.in_flight = 3;  // node 2's calls, on 4 slots a node: the target is 1
    in.capacity = 4;
    auto d = decide_scale(in, t0);
    CHECK(d.target == 1);
    // Node 3 goes (newest, idle past the window); node 1 not yet; node 2 never while busy;
    // node 0 is the head and stays while others are there.
    CHECK(d.end == std::vector<int>{3});
    CHECK(d.start.empty());
}

TEST_CASE("autoscale: node 0 is reaped only as the last", "[autoscale]") {
    auto in = input(0, 4, 0);
    // Node 0 is the newest (a replacement) and every node is idle past the window.
    in.nodes = {node(0, 0, t0 - 5min, t0 - 1min), node(1, 0, t0 - 5min, t0 - 9min),
                node(2, 0, t0 - 5min, t0 - 8min)};
    auto d = decide_scale(in, t0);
    CHECK(d.target == 0);
    CHECK(d.end == std::vector<int>{2, 1, 0});  // newest first, the head last
    // With one call waiting, the head stays and the others go.
    in.waiting = 1;
    d = decide_scale(in, t0);
    CHECK(d.target == 1);
    CHECK(d.end == std::vector<int>{2, 1});
    // The head alone goes when it is the last one there.
    in.waiting = 0;
    in.nodes = {node(0, 0, t0 - 5min)};
    CHECK(decide_scale(in, t0).end == std::vector<int>{0});
}

TEST_CASE("autoscale: the constructor's nodes count in the reap budget", "[autoscale]") {
    // Made with nodes = 4 and min = 1: the four are nodes like any others, and all but one go
    // once idle for the window (not kept because the constructor asked for them).
    auto in = input(1, 8, 0);
    in.nodes = {node(0, 0, t0 - 2min), node(1, 0, t0 - 2min), node(2, 0, t0 - 2min),
                node(3, 0, t0 - 2min)};
    auto d = decide_scale(in, t0);
    CHECK(d.target == 1);
    CHECK(d.end.size() == 3);
    CHECK(std::find(d.end.begin(), d.end.end(), 0) == d.end.end());
    // And min is never passed: nodes already leaving are not counted as there.
    for (auto& n : in.nodes)
        if (n.index != 0) n.leaving = true;
    CHECK(decide_scale(in, t0).end.empty());
    CHECK(decide_scale(in, t0).start.empty());
}

TEST_CASE("autoscale: a new node takes the lowest free index", "[autoscale]") {
    auto in = input(0, 8, 3);
    in.nodes = {node(0, 1), node(2, 1)};
    auto leaving = node(1);
    leaving.leaving = true;  // its index is still taken
    in.nodes.push_back(leaving);
    in.in_flight = 2;
    const auto d = decide_scale(in, t0);
    CHECK(d.target == 5);
    CHECK(d.start == std::vector<int>{3, 4, 5});
}

TEST_CASE("autoscale: starting and frozen nodes are never ended", "[autoscale]") {
    auto in = input(0, 8, 0);
    auto a = node(1, 0, t0 - 1h);
    a.starting = true;
    auto b = node(2, 0, t0 - 1h);
    b.frozen = true;
    in.nodes = {node(0, 0, t0 - 1h), a, b};
    const auto d = decide_scale(in, t0);
    CHECK(d.end.empty());  // node 0 is not the last one there
}

TEST_CASE("autoscale: oscillating demand does not stop and restart a node within a window",
          "[autoscale]") {
    // One call every 20 s, each running 5 s, on a window of 60 s: the node is never idle for a
    // whole window, so it is never ended and never started again.
    auto in = input(0, 4, 0);
    in.nodes = {node(0, 0, t0)};
    SteadyClock::time_point idle_since = t0;
    for (int s = 0; s < 600; ++s) {
        const auto now = t0 + std::chrono::seconds(s);
        const bool busy = s % 20 < 5;
        if (!busy && s % 20 == 5) idle_since = now;
        in.in_flight = busy ? 1 : 0;
        in.nodes[0].calls = busy ? 1 : 0;
        in.nodes[0].idle_since = idle_since;
        const auto d = decide_scale(in, now);
        INFO("second " << s);
        REQUIRE(d.end.empty());
        REQUIRE(d.start.empty());
    }
    // The burst stops: the node goes once idle for a whole window, not before.
    in.in_flight = 0;
    in.nodes[0].calls = 0;
    in.nodes[0].idle_since = t0 + 600s;
    CHECK(decide_scale(in, t0 + 659s).end.empty());
    CHECK(decide_scale(in, t0 + 660s).end == std::vector<int>{0});
}

TEST_CASE("autoscale: a pure function: no threads, locks, clocks read or I/O", "[autoscale]") {
    for (const char* file : {"src/pool/autoscale.hpp", "src/pool/autoscale.cpp"}) {
        INFO(file);
        CHECK(sky::test::mentions(std::string(SKY_SOURCE_DIR) + "/" + file,
                                  {"<thread>", "<mutex>", "<condition_variable>", "<future>",
                                   "std::thread", "std::mutex", "sleep_for", "::now()", "io/"}) ==
              std::vector<std::string>{});
    }
}

TEST_CASE("autoscale: a resize's count is the target: idle nodes leave first, then busy ones",
          "[autoscale]") {
    // Four nodes on max = 8 with 20 calls waiting: the demand asks for 8, a resize to 2 sets 2.
    auto in = input(0, 8, 20, 2);
    in.nodes = {node(0, 1, t0, t0 - 9min), node(1, 0, t0, t0 - 8min), node(2, 1, t0, t0 - 7min),
                node(3, 0, t0, t0 - 6min)};
    in.desired = 2;
    auto d = decide_scale(in, t0);
    CHECK(d.target == 2);
    CHECK(d.start.empty());
    // Idle ones without waiting for the window (newest first), never a busy one while an idle
    // one is left.
    CHECK(d.end == std::vector<int>{3, 1});
    // To 1: the busy node 2 drains too (it ends once its call finishes); node 0 stays.
    in.desired = 1;
    d = decide_scale(in, t0);
    CHECK(d.end == std::vector<int>{3, 1, 2});
    // Clamped to the bounds: a resize to 20 on max = 8 starts 4 at once.
    in.desired = 20;
    d = decide_scale(in, t0);
    CHECK(d.target == 8);
    CHECK(d.start == std::vector<int>{4, 5, 6, 7});
    // To 0 with min = 1: node 0 stays.
    in.desired = 0;
    in.bounds.min = 1;
    d = decide_scale(in, t0);
    CHECK(d.target == 1);
    CHECK(d.end.size() == 3);
    CHECK(std::find(d.end.begin(), d.end.end(), 0) == d.end.end());
}

TEST_CASE("autoscale: a resize never removes a frozen or starting node", "[autoscale]") {
    auto in = input(0, 8, 0);
    auto a = node(1, 0, t0 - 1h, t0 - 1min);
    a.frozen = true;
    auto b = node(2, 0, t0, t0);
    b.starting = true;
    in.nodes = {node(0, 0, t0 - 1h, t0 - 2h), a, b};
    in.desired = 0;
    const auto d = decide_scale(in, t0);
    // Only node 0 may go, and it is not the last one there (1 and 2 stay): nothing ends.
    CHECK(d.end.empty());
    CHECK(d.there == 3);
}
