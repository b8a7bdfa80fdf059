// A preemption notice on every rank (api.md §10a), as a user of sky tests it on sky::Simulated:
// a broadcast step loop that reports progress, a notice for node 1 that every rank sees within a
// second and before its deadline, one checkpoint step for all, the events in a cloud's order,
// -1 without progress, nothing without a fault, and a call resumed on the replacement.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "e2e/simulated/functions.hpp"
#include "providers/simulated/simulated.hpp"

using namespace simtest;
using namespace std::chrono_literals;

namespace {

struct LoopArgs {
    int steps = 0;
    int step_ms = 20;
    bool report = true;  // sky::progress each step
    bool pause = false;  // wait (bounded) at step wait_at + node until a notice stands
    std::int64_t wait_at = 0;
    bool go_on = false;  // after saving, go on to `steps` instead of returning
    std::string dir;     // where each node saves its step ("": nowhere)

    template <class A>
    void serialize(A& ar) {
        ar(steps, step_ms, report, pause, wait_at, go_on, dir);
    }
};

struct LoopResult {
    int node = -1;
    std::int64_t resumed_from = -1;  // the step loaded from the node's checkpoint (-1: none)
    std::int64_t saved = -2;         // the step saved (-2: none)
    std::int64_t last = -1;          // the last step run
    std::int64_t checkpoint_step = -2;
    std::int64_t step_when_seen = -2;
    double seen_at = 0;   // system clock, seconds: when the notice was first seen
    double deadline = 0;  // the notice's deadline, seconds
    std::string instance_id;

    template <class A>
    void serialize(A& ar) {
        ar(node, resumed_from, saved, last, checkpoint_step, step_when_seen, seen_at, deadline,
           instance_id);
    }
};

double seconds(std::chrono::system_clock::time_point t) {
    return std::chrono::duration<double>(t.time_since_epoch()).count();
}

std::string checkpoint_file(const std::string& dir, int node) {
    return dir + "/node-" + std::to_string(node) + ".step";
}

// The training loop of api.md §10a, with a pause at one step so that the test knows the highest
// step the ranks reported when the notice comes.
LoopResult step_loop(LoopArgs a) {
    LoopResult r;
    r.node = sky::instance_info().node;
    if (!a.dir.empty())
        if (std::ifstream in(checkpoint_file(a.dir, r.node)); in >> r.resumed_from) {
        }
    const std::int64_t wait_at = a.wait_at + r.node;
    for (std::int64_t step = r.resumed_from < 0 ? 0 : r.resumed_from; step < a.steps; ++step) {
        std::this_thread::sleep_for(std::chrono::milliseconds(a.step_ms));
        r.last = step;
        if (a.report) sky::progress(step);
        if (a.pause && step == wait_at && r.resumed_from < 0)
            for (int i = 0; i < 2000 && !sky::preemption(); ++i) std::this_thread::sleep_for(10ms);
        auto p = sky::preemption();
        if (!p) continue;
        if (r.step_when_seen == -2) {
            r.seen_at = seconds(std::chrono::system_clock::now());
            r.step_when_seen = step;
            r.checkpoint_step = p->checkpoint_step;
            r.deadline = seconds(p->deadline);
            r.instance_id = p->instance_id;
        }
        if (step >= p->checkpoint_step && r.saved == -2) {
            r.saved = step;
            if (!a.dir.empty()) {
                std::ofstream out(checkpoint_file(a.dir, r.node) + ".tmp");
                out << step << "\n";
                out.close();
                std::filesystem::rename(checkpoint_file(a.dir, r.node) + ".tmp",
                                        checkpoint_file(a.dir, r.node));
            }
            if (!a.go_on) return r;
        }
    }
    return r;
}

// The order of the notice, the reclaim and the replacement of `victim`.
std::vector<std::string> notice_order(Recorder& rec, const std::string& victim) {
    std::vector<std::string> order;
    std::lock_guard lk(rec.m);
    for (const auto& e : rec.events) {
        if (auto* p = std::get_if<sky::PreemptionNotice>(&e); p && p->instance_id == victim)
            order.push_back("notice");
        if (auto* p = std::get_if<sky::InstancePreempted>(&e); p && p->instance_id == victim)
            order.push_back("preempted");
        if (auto* p = std::get_if<sky::InstanceReplaced>(&e); p && p->old_instance_id == victim)
            order.push_back("replaced");
    }
    return order;
}

}  // namespace

TEST_CASE("simulated: a notice for node 1 reaches every rank, which all save the same step",
          "[simulated][preemption]") {
    Recorder rec;
    std::string victim;
    std::vector<LoopResult> results;
    {
        // Warned 2 s after the start, reclaimed 2 s later.
        sky::ComputePool pool{
            simulated({.faults = {sky::Fault::preempt(1, 4s, 2s)}, .seed = 3}, 3, rec)};
        victim = pool.instances().at(1).id;
        // Rank r pauses at step 10 + r: the highest step reported is 12 when the notice comes.
        results =
            sky::compute<step_loop>(LoopArgs{.steps = 1000, .pause = true, .wait_at = 10}) | pool;
        REQUIRE(eventually([&] { return !rec.all<sky::InstanceReplaced>().empty(); }, 30s));
    }
    auto notices = rec.all<sky::PreemptionNotice>();
    REQUIRE(notices.size() == 1);
    const auto& n = notices[0];
    CHECK(n.node == 1);
    CHECK(n.instance_id == victim);
    CHECK(n.checkpoint_step == 13);  // one more than the highest step reported
    CHECK_FALSE(n.reason.empty());
    // The simulated cloud warns `notice` before the reclaim: that is when the pool heard of it.
    const double warned = seconds(n.deadline) - 2.0;
    REQUIRE(results.size() == 3);
    for (int r = 0; r < 3; ++r) {
        INFO("rank " << r);
        const auto& x = results[static_cast<std::size_t>(r)];
        CHECK(x.node == r);
        CHECK(x.checkpoint_step == 13);
        CHECK(x.saved == 13);  // every rank stops at the same step
        CHECK(x.instance_id == victim);
        CHECK(x.deadline == Approx(seconds(n.deadline)).margin(0.002));
        CHECK(x.seen_at - warned < 1.0);    // within a second of the pool hearing of it
        CHECK(x.seen_at < x.deadline);      // and before the machine goes
        CHECK(x.step_when_seen == 10 + r);  // seen while paused: no rank went past its pause
    }
    CHECK(notice_order(rec, victim) == std::vector<std::string>{"notice", "preempted", "replaced"});
    CHECK(children() == 0);
}

TEST_CASE("simulated: without progress reports the checkpoint step is -1: save at once",
          "[simulated][preemption]") {
    Recorder rec;
    std::vector<LoopResult> results;
    {
        sky::ComputePool pool{
            simulated({.faults = {sky::Fault::preempt(1, 3s, 2s)}, .seed = 4}, 3, rec)};
        results = sky::compute<step_loop>(
                      LoopArgs{.steps = 1000, .report = false, .pause = true, .wait_at = 5}) |
                  pool;
        REQUIRE(eventually([&] { return !rec.all<sky::InstanceReplaced>().empty(); }, 30s));
    }
    auto notices = rec.all<sky::PreemptionNotice>();
    REQUIRE(notices.size() == 1);
    CHECK(notices[0].checkpoint_step == -1);
    REQUIRE(results.size() == 3);
    for (const auto& x : results) {
        INFO("rank " << x.node);
        CHECK(x.checkpoint_step == -1);
        CHECK(x.saved == x.step_when_seen);  // at once
        CHECK(x.seen_at < x.deadline);
    }
    CHECK(children() == 0);
}

TEST_CASE("simulated: no notice without a fault that gives one", "[simulated][preemption]") {
    Recorder rec;
    {
        // A reclaim without a warning (the old form), on node 2; nodes 0 and 1 never hear.
        sky::ComputePool pool{
            simulated({.faults = {sky::Fault::preempt(2, 1500ms)}, .seed = 5}, 3, rec)};
        auto a = sky::compute<step_loop>(LoopArgs{.steps = 40, .step_ms = 25}).retries(1) | pool;
        REQUIRE(a.size() == 3);
        for (const auto& x : a) {
            CHECK(x.step_when_seen == -2);
            CHECK(x.last == 39);
        }
        REQUIRE(eventually([&] { return !rec.all<sky::InstanceReplaced>().empty(); }, 30s));
    }
    CHECK(rec.all<sky::PreemptionNotice>().empty());
    CHECK(rec.all<sky::InstancePreempted>().size() == 1);
    CHECK(children() == 0);
}

TEST_CASE("simulated: with .retries(1) the preempted rank resumes from its saved step",
          "[simulated][preemption]") {
    const auto dir = std::filesystem::temp_directory_path() /
                     ("sky-spot-checkpoint-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    struct Cleanup {
        std::filesystem::path p;
        ~Cleanup() {
            std::error_code ec;
            std::filesystem::remove_all(p, ec);
        }
    } cleanup{dir};
    Recorder rec;
    std::string victim, replacement;
    std::vector<LoopResult> results;
    {
        sky::ComputePool pool{
            simulated({.faults = {sky::Fault::preempt(1, 4s, 2s)}, .seed = 6}, 3, rec)};
        victim = pool.instances().at(1).id;
        // Each rank saves at the checkpoint step and goes on; node 1's machine goes in the middle
        // and its call runs again on the replacement, from what it saved.
        results = sky::compute<step_loop>(LoopArgs{.steps = 60,
                                                   .step_ms = 100,
                                                   .pause = true,
                                                   .wait_at = 10,
                                                   .go_on = true,
                                                   .dir = dir.string()})
                      .retries(1) |
                  pool;
        for (const auto& i : pool.instances())
            if (i.node == 1) replacement = i.id;
    }
    REQUIRE(results.size() == 3);
    auto notices = rec.all<sky::PreemptionNotice>();
    REQUIRE(notices.size() == 1);
    const std::int64_t cp = notices[0].checkpoint_step;
    CHECK(cp == 13);
    for (const auto& x : results) {
        INFO("rank " << x.node);
        CHECK(x.last == 59);  // every rank finished
        if (x.node == 1) {
            CHECK(x.resumed_from == cp);    // the rerun loaded what the first run saved
            CHECK(x.step_when_seen == -2);  // the notice was withdrawn once the node was replaced
        } else {
            CHECK(x.resumed_from == -1);
            CHECK(x.saved == cp);
        }
    }
    CHECK(replacement != victim);
    CHECK(notice_order(rec, victim) == std::vector<std::string>{"notice", "preempted", "replaced"});
    CHECK(children() == 0);
}

TEST_CASE("simulated: a notice longer than the time to the reclaim is a ConfigError",
          "[simulated][preemption]") {
    Recorder rec;
    CHECK_THROWS_WITH(
        sky::ComputePool(simulated({.faults = {sky::Fault::preempt(1, 1s, 2s)}}, 2, rec)),
        Catch::Contains("must not be longer than after"));
}

TEST_CASE("simulated: SKY_SIMULATED gives a preempt fault its notice_ms",
          "[simulated][preemption]") {
    const auto s = sky::detail::with_simulated_env(
        {}, R"({"faults":[{"kind":"preempt","node":1,"after_ms":3000,"notice_ms":2000}]})");
    REQUIRE(s.faults.size() == 1);
    CHECK(s.faults[0].after == 3000ms);
    CHECK(s.faults[0].notice == 2000ms);
    // Only a reclaim comes with a warning.
    CHECK_THROWS_WITH(
        sky::detail::with_simulated_env({}, R"({"faults":[{"kind":"lose","node":1,"after_ms":3000,)"
                                            R"("notice_ms":2000}]})"),
        Catch::Contains("unknown key \"notice_ms\""));
}
