// The job's CI test: it runs on sky::Simulated, a cloud in a box, through the failures a real
// cloud produces. No credentials, no root, no network; nodes are worker processes of this test.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <chrono>
#include <mutex>
#include <sstream>

#include "job.hpp"

using namespace std::chrono_literals;

int main(int argc, char** argv) {
    sky::init(argc, argv);  // the test program is its own worker, like any sky program
    return Catch::Session().run(argc, argv);
}

namespace {

constexpr int items = 100;
constexpr long expected_total = 328350;  // the sum of i*i for i < 100

// The events of a pool, to check what happened on the way.
struct Seen {
    std::mutex m;
    int preempted = 0, replaced = 0;
    sky::Callback callback() {
        return [this](const sky::Event& e) -> std::optional<sky::Event> {
            std::lock_guard lk(m);
            if (std::holds_alternative<sky::InstancePreempted>(e)) ++preempted;
            if (std::holds_alternative<sky::InstanceReplaced>(e)) ++replaced;
            return std::nullopt;
        };
    }
};

sky::PoolSpec on(sky::Simulated cloud, Seen& seen, sky::Spot spot = "always") {
    return {.provider = std::move(cloud),
            .nodes = 2,
            .spot = std::move(spot),
            .display = sky::Display::quiet,
            .on_event = seen.callback()};
}

}  // namespace

TEST_CASE("the job finishes when a spot node is reclaimed in the middle") {
    Seen seen;
    sky::ComputePool pool{on({.faults = {sky::Fault::preempt(1, 300ms)}, .seed = 1}, seen)};
    const job::Result r = job::run(pool, items);
    CHECK(r.items == items);
    CHECK(r.total == expected_total);
    std::lock_guard lk(seen.m);
    CHECK(seen.preempted == 1);
}

TEST_CASE("the job finishes when a node dies after a few calls") {
    Seen seen;
    sky::ComputePool pool{on({.faults = {sky::Fault::lose_after_calls(0, 2)}}, seen)};
    CHECK(job::run(pool, items).total == expected_total);
    std::lock_guard lk(seen.m);
    CHECK(seen.preempted == 0);
}

TEST_CASE("the job waits out capacity errors on the cheapest offers") {
    Seen seen;
    std::ostringstream out;
    CHECK(job::main_with(on({.capacity_errors = 3}, seen, "if-available"), items, out) == 0);
    CHECK(out.str() == "scored 100 items, total 328350\n");
}

TEST_CASE("the job says so when no offer has capacity") {
    Seen seen;
    std::ostringstream out;
    CHECK(job::main_with(on({.capacity_errors = 1'000'000}, seen, "never"), items, out) == 2);
    CHECK(out.str().rfind("no capacity: tried ", 0) == 0);
}

TEST_CASE("the job says so when a node cannot be set up") {
    Seen seen;
    std::ostringstream out;
    auto spec =
        on({.faults = {sky::Fault::fail_bootstrap(1, "E: Unable to locate package foo")}}, seen);
    spec.image.apt = {"foo"};
    CHECK(job::main_with(std::move(spec), items, out) == 3);
    CHECK(out.str() == "node 1 could not be set up (apt)\n");
}
