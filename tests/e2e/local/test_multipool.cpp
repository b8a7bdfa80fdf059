// MultiPool tears its pools down in parallel: when it ends, and when one of them fails to start.
// Each pool's teardown is made to take a while (its worker is stopped with SIGSTOP, so the pool
// waits out its grace period before it kills it); parallel teardowns overlap, which the order
// of the pools' PoolStopping and CostFinal events shows.
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <set>
#include <sstream>

#include "e2e/local/functions.hpp"
#include "e2e/local/recorder.hpp"
#include "support/proc_file.hpp"

using namespace e2e;
using namespace std::chrono_literals;

namespace {

// Child processes of this test process whose environment names `pool_id` (the pool's workers).
std::vector<int> workers_of(const std::string& pool_id) {
    std::vector<int> out;
    const std::string want = "SKY_PARENT_POOL=" + pool_id;
    DIR* d = ::opendir("/proc");
    if (!d) return out;
    int seen = 0;
    while (dirent* e = ::readdir(d)) {
        if (++seen > 100000) break;
        const std::string name = e->d_name;
        if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
        std::string text = sky::test::read_proc_file("/proc/" + name + "/stat");
        const auto close = text.rfind(')');
        if (close == std::string::npos) continue;
        std::istringstream rest(text.substr(close + 1));
        std::string state;
        long ppid = 0;
        rest >> state >> ppid;
        if (ppid != ::getpid() || state == "Z") continue;
        std::string block = sky::test::read_proc_file("/proc/" + name + "/environ");
        std::istringstream entries(block);
        for (std::string entry; std::getline(entries, entry, '\0');)
            if (entry == want) out.push_back(std::stoi(name));
    }
    ::closedir(d);
    return out;
}

// A pool's events, and whether its workers were stopped (SIGSTOP) once it started.
struct Watched {
    Recorder events;
    std::atomic<int> frozen{0};

    // on_event for a pool whose workers stop answering once it has started: its teardown then
    // waits out the workers' grace period.
    sky::Callback freeze_on_start() {
        return [this](const sky::Event& e) -> std::optional<sky::Event> {
            if (auto* s = std::get_if<sky::PoolStarted>(&e))
                for (int pid : workers_of(s->pool_id))
                    if (::kill(pid, SIGSTOP) == 0) ++frozen;
            events.add(e);
            return std::nullopt;
        };
    }
    std::optional<Recorder::Clock::time_point> stopping() {
        return events.first(
            [](const sky::Event& e) { return std::holds_alternative<sky::PoolStopping>(e); });
    }
    std::optional<Recorder::Clock::time_point> ended() {
        return events.first(
            [](const sky::Event& e) { return std::holds_alternative<sky::CostFinal>(e); });
    }
};

sky::PoolSpec frozen_pool(Watched& w) {
    auto spec = quiet(1);
    spec.on_event = w.freeze_on_start();
    spec.collect_metrics = false;
    return spec;
}

// Each teardown began before the other ended: they ran at the same time.
void check_overlap(Watched& a, Watched& b) {
    const auto a_stop = a.stopping(), a_end = a.ended(), b_stop = b.stopping(), b_end = b.ended();
    REQUIRE(a_stop);
    REQUIRE(a_end);
    REQUIRE(b_stop);
    REQUIRE(b_end);
    CHECK(*a_stop < *b_end);
    CHECK(*b_stop < *a_end);
}

}  // namespace

TEST_CASE("MultiPool tears its pools down in parallel when it ends", "[local][multipool]") {
    Watched a, b;
    {
        sky::MultiPool multi{frozen_pool(a), frozen_pool(b)};
        auto& [pa, pb] = multi;
        CHECK(pa.is_active());
        CHECK(pb.is_active());
        // Both pools' workers are stopped before the MultiPool ends (their PoolStarted came).
        REQUIRE(a.events.wait_for(
            [](const sky::Event& e) { return std::holds_alternative<sky::PoolStarted>(e); }));
        REQUIRE(b.events.wait_for(
            [](const sky::Event& e) { return std::holds_alternative<sky::PoolStarted>(e); }));
    }
    REQUIRE(a.frozen == 1);
    REQUIRE(b.frozen == 1);
    check_overlap(a, b);
}

TEST_CASE(
    "MultiPool: when one pool fails to start, every pool that started is torn down in "
    "parallel before the error is rethrown",
    "[local][multipool]") {
    Watched a, b;
    Recorder bad;
    // The failing pool: a simulated node whose bootstrap fails after 2 s, long after a and b
    // are up.
    sky::Simulated cloud{
        .faults = {sky::Fault::slow_bootstrap(0, 2000ms),
                   sky::Fault::fail_bootstrap(0, "E: Unable to locate package x")}};
    try {
        sky::MultiPool multi{frozen_pool(a),
                             sky::PoolSpec{.provider = cloud,
                                           .nodes = 1,
                                           .spot = sky::Spot::Never{},
                                           .display = sky::Display::quiet,
                                           .on_event = bad.callback(),
                                           .collect_metrics = false},
                             frozen_pool(b)};
        FAIL("the MultiPool started with a failing pool");
    } catch (const sky::BootstrapError& e) {
        CHECK(e.phase() != "");
        CHECK(std::string(e.what()).find("Unable to locate package x") != std::string::npos);
        // Both started pools ended before the error reached here.
        CHECK(a.ended());
        CHECK(b.ended());
    }
    REQUIRE(a.frozen == 1);
    REQUIRE(b.frozen == 1);
    check_overlap(a, b);
    CHECK_FALSE(
        bad.first([](const sky::Event& e) { return std::holds_alternative<sky::PoolStarted>(e); }));
}
