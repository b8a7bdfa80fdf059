// Tests a user of sky writes to check a program's failure handling on sky::Simulated: the cloud's
// failures (no capacity, a reclaimed spot node, a lost or frozen machine, a failing bootstrap),
// the events and costs a cloud reports, and that nothing is left running.
#include <catch2/catch.hpp>
#include <future>
#include <set>
#include <thread>

#include "e2e/simulated/functions.hpp"

using namespace simtest;
using namespace std::chrono_literals;

namespace {

// What the catalog offers on AWS in the simulated cloud's region (same rows, same on-demand
// prices), cheapest on-demand first.
std::vector<sky::Offer> catalog_offers(std::optional<sky::Accelerator> accelerator) {
    return sky::Catalog::embedded().select(
        {.accelerator = std::move(accelerator), .region = "us-east-1", .spot = sky::Spot::Never{}},
        "aws");
}

double catalog_on_demand(const std::string& instance_type) {
    for (const auto& o : sky::Catalog::embedded().offers("aws"))
        if (o.instance_type == instance_type && o.region == "us-east-1") return o.on_demand_price;
    return -1;
}

}  // namespace

TEST_CASE("simulated: a gather with .retries(1) survives a preemption in the middle",
          "[simulated]") {
    Recorder rec;
    std::string victim, replacement;
    {
        sky::ComputePool pool{
            simulated({.faults = {sky::Fault::preempt(1, 1s)}, .seed = 7}, 2, rec)};
        REQUIRE(pool.instances().size() == 2);
        victim = pool.instances().at(1).id;
        std::vector<sky::PendingCompute<int>> calls;
        for (int i = 0; i < 8; ++i) calls.push_back(sky::compute<node_after>(600).retries(1));
        auto gather =
            std::async(std::launch::async, [&] { return sky::gather(std::move(calls)) >> pool; });
        REQUIRE(gather.wait_for(60s) == std::future_status::ready);
        std::vector<int> nodes = gather.get();
        CHECK(nodes.size() == 8);
        // Back at its size, with a new machine in node 1's place.
        REQUIRE(eventually([&] { return pool.instance_count() == 2; }, 20s));
        for (const auto& i : pool.instances())
            if (i.node == 1) replacement = i.id;
        CHECK_FALSE(replacement.empty());
        CHECK(replacement != victim);
        CHECK((sky::compute<node_after>(0) | pool) == std::vector<int>{0, 1});
    }
    auto preempted = rec.all<sky::InstancePreempted>();
    REQUIRE(preempted.size() == 1);
    CHECK(preempted[0].instance_id == victim);
    CHECK(preempted[0].node == 1);
    // Preempted, then launched and provisioned anew, bootstrapped, then replaced: as on a cloud.
    std::vector<std::string> order;
    {
        std::lock_guard lk(rec.m);
        for (const auto& e : rec.events) {
            if (auto* p = std::get_if<sky::InstancePreempted>(&e); p && p->instance_id == victim)
                order.push_back("preempted");
            if (auto* p = std::get_if<sky::InstanceProvisioned>(&e);
                p && p->instance_id == replacement) {
                order.push_back("provisioned");
                CHECK(p->node == 1);
                CHECK(p->spot);
            }
            if (auto* p = std::get_if<sky::BootstrapCompleted>(&e);
                p && p->instance_id == replacement)
                order.push_back("bootstrapped");
            if (auto* p = std::get_if<sky::InstanceReplaced>(&e)) {
                order.push_back("replaced");
                CHECK(p->old_instance_id == victim);
                CHECK(p->new_instance_id == replacement);
                CHECK(p->node == 1);
            }
        }
    }
    CHECK(order ==
          std::vector<std::string>{"preempted", "provisioned", "bootstrapped", "replaced"});
    CHECK(children() == 0);
}

TEST_CASE("simulated: a call without retries on a preempted node fails with NodeLostError",
          "[simulated]") {
    Recorder rec;
    {
        sky::ComputePool pool{simulated({.faults = {sky::Fault::preempt(1, 500ms)}}, 2, rec)};
        const std::string victim = pool.instances().at(1).id;
        // A broadcast runs once on each node: node 1's call cannot move elsewhere.
        try {
            (void)(sky::compute<node_after>(2000) | pool);
            FAIL("no exception");
        } catch (const sky::NodeLostError& e) {
            CHECK(e.node() == 1);
            CHECK(e.instance_id() == victim);
            CHECK(e.reason() == sky::NodeLostError::Reason::preempted);
        }
        // The pool replaces the node and goes on.
        REQUIRE(eventually([&] { return pool.instance_count() == 2; }, 20s));
        CHECK((sky::compute<add>(2, 3) >> pool) == 5);
    }
    CHECK(children() == 0);
}

TEST_CASE("simulated: a lost machine is unreachable, not preempted, and is replaced",
          "[simulated]") {
    Recorder rec;
    {
        sky::ComputePool pool{simulated({.faults = {sky::Fault::lose(0, 300ms)}}, 1, rec)};
        const std::string victim = pool.instances().at(0).id;
        try {
            (void)(sky::compute<node_after>(5000) >> pool);
            FAIL("no exception");
        } catch (const sky::NodeLostError& e) {
            CHECK(e.instance_id() == victim);
            CHECK(e.reason() == sky::NodeLostError::Reason::unreachable);
        }
        REQUIRE(eventually([&] { return rec.all<sky::InstanceReplaced>().size() == 1; }, 20s));
        CHECK(pool.instances().at(0).id != victim);
        CHECK((sky::compute<add>(1, 1) >> pool) == 2);
    }
    CHECK(rec.all<sky::InstancePreempted>().empty());
    CHECK(children() == 0);
}

TEST_CASE("simulated: a machine dies after its n-th call, and a call with retries re-runs",
          "[simulated]") {
    Recorder rec;
    {
        sky::ComputePool pool{simulated({.faults = {sky::Fault::lose_after_calls(0, 3)}}, 1, rec)};
        const std::string victim = pool.instances().at(0).id;
        for (int i = 0; i < 3; ++i) CHECK((sky::compute<add>(i, 1) >> pool) == i + 1);
        // The machine is gone with the third answer: the fourth call runs on its replacement.
        CHECK((sky::compute<add>(40, 2).retries(1) >> pool) == 42);
        // Events reach the recorder on the pool's event thread, maybe after the call's result.
        REQUIRE(eventually([&] { return rec.all<sky::InstanceReplaced>().size() == 1; }, 20s));
        auto replaced = rec.all<sky::InstanceReplaced>();
        CHECK(replaced[0].old_instance_id == victim);
        CHECK(pool.instances().at(0).id == replaced[0].new_instance_id);
        // The replacement has no fault: it serves any number of calls.
        for (int i = 0; i < 5; ++i) CHECK((sky::compute<add>(i, i) >> pool) == 2 * i);
        CHECK(rec.all<sky::InstanceReplaced>().size() == 1);
    }
    CHECK(children() == 0);
}

TEST_CASE("simulated: ProvisionError lists every attempt when no offer has capacity",
          "[simulated]") {
    const auto offers = catalog_offers("A100");
    REQUIRE(offers.size() >= 2);
    Recorder rec;
    const auto t0 = std::chrono::steady_clock::now();
    try {
        sky::ComputePool pool{{.provider = sky::Simulated{.capacity_errors = 1000},
                               .nodes = 2,
                               .accelerator = "A100",
                               .spot = sky::Spot::Always{.retries = 1, .interval = 0s},
                               .display = sky::Display::quiet,
                               .on_event = rec.callback()}};
        FAIL("the pool started");
    } catch (const sky::ProvisionError& e) {
        // Two rounds (Always with one retry) over every A100 offer, cheapest first.
        const auto& attempts = e.attempts();
        REQUIRE(attempts.size() == 2 * offers.size());
        std::set<std::string> types;
        for (const auto& a : attempts) {
            CHECK(a.provider == "simulated");
            CHECK(a.region == "us-east-1");
            CHECK(a.spot);
            CHECK(a.error.find("InsufficientInstanceCapacity") != std::string::npos);
            types.insert(a.instance_type);
            CHECK(std::string(e.what()).find(a.instance_type) != std::string::npos);
        }
        std::set<std::string> want;
        for (const auto& o : offers) want.insert(o.instance_type);
        CHECK(types == want);
    }
    CHECK(std::chrono::steady_clock::now() - t0 < 30s);
    CHECK(rec.all<sky::InstanceLaunching>().size() == 2 * offers.size());
    CHECK(rec.all<sky::InstanceProvisioned>().empty());
    CHECK(children() == 0);
}

TEST_CASE("simulated: a capacity error moves to the next offer", "[simulated]") {
    const auto offers = catalog_offers("A100");
    REQUIRE(offers.size() >= 2);
    Recorder rec;
    {
        sky::ComputePool pool{{.provider = sky::Simulated{.capacity_errors = 1},
                               .nodes = 2,
                               .accelerator = "A100",
                               .spot = "never",
                               .display = sky::Display::quiet,
                               .on_event = rec.callback()}};
        for (const auto& i : pool.instances()) {
            CHECK(i.provider == "simulated");
            CHECK(i.instance_type == offers[1].instance_type);
            CHECK_FALSE(i.spot);
            CHECK(i.hourly_price == Approx(offers[1].on_demand_price));
        }
        // The program sees the accelerator it asked for, as on a cloud.
        CHECK((sky::compute<accelerators>() >> pool) == std::vector<std::string>{"A100"});
    }
    auto launching = rec.all<sky::InstanceLaunching>();
    REQUIRE(launching.size() == 2);
    CHECK(launching[0].instance_type == offers[0].instance_type);
    CHECK(launching[1].instance_type == offers[1].instance_type);
    CHECK(launching[0].provider == "simulated");
    CHECK(children() == 0);
}

TEST_CASE("simulated: a failed bootstrap is a BootstrapError with its phase and output",
          "[simulated]") {
    Recorder rec;
    const auto t0 = std::chrono::steady_clock::now();
    try {
        auto spec = simulated(
            {.faults = {sky::Fault::fail_bootstrap(1,
                                                   "Reading package lists...\n"
                                                   "E: Unable to locate package nosuchpkg")}},
            2, rec);
        spec.image.apt = {"nosuchpkg"};
        sky::ComputePool pool{spec};
        FAIL("the pool started");
    } catch (const sky::BootstrapError& e) {
        CHECK(e.node() == 1);
        CHECK(e.phase() == "apt");
        CHECK(e.instance_id().rfind("sim-", 0) == 0);
        REQUIRE(e.output().size() == 2);
        CHECK(e.output().back() == "E: Unable to locate package nosuchpkg");
        CHECK(std::string(e.what()).find("Unable to locate package") != std::string::npos);
        CHECK(std::string(e.what()).find("'apt'") != std::string::npos);
    }
    CHECK(std::chrono::steady_clock::now() - t0 < 30s);
    CHECK(rec.all<sky::BootstrapCompleted>().size() <= 1);  // node 0's may have finished
    CHECK(children() == 0);
}

TEST_CASE("simulated: a slow bootstrap delays the pool's start by its delay", "[simulated]") {
    Recorder rec;
    const auto t0 = std::chrono::steady_clock::now();
    {
        sky::ComputePool pool{
            simulated({.faults = {sky::Fault::slow_bootstrap(0, 1500ms)}}, 2, rec)};
        CHECK(std::chrono::steady_clock::now() - t0 >= 1500ms);
        CHECK((sky::compute<add>(1, 2) >> pool) == 3);
    }
    CHECK(rec.all<sky::BootstrapCompleted>().size() == 2);
    CHECK(children() == 0);
}

TEST_CASE("simulated: a frozen node ends in NodeLostError within the heartbeat bound",
          "[simulated]") {
    Recorder rec;
    // idle_timeout 4 s: a heartbeat every second; a worker silent for several is lost.
    auto spec = simulated({.faults = {sky::Fault::freeze(0, 300ms)}}, 1, rec);
    spec.idle_timeout = 4s;
    {
        sky::ComputePool pool{spec};
        const std::string victim = pool.instances().at(0).id;
        const auto t0 = std::chrono::steady_clock::now();
        auto call = pool.submit(sky::compute<node_after>(60'000));
        REQUIRE(call.wait_for(25s));  // if not, the pool's teardown ends the frozen worker
        try {
            call.get();
            FAIL("no exception");
        } catch (const sky::NodeLostError& e) {
            CHECK(e.instance_id() == victim);
            CHECK(e.reason() == sky::NodeLostError::Reason::unreachable);
        }
        // 4 heartbeats of 1 s and 5 s of grace, the 2 s a lost worker gets to exit, slack.
        CHECK(std::chrono::steady_clock::now() - t0 < 20s);
        // A frozen machine is not reused: the node gets a new one.
        REQUIRE(eventually([&] { return rec.all<sky::InstanceReplaced>().size() == 1; }, 20s));
        CHECK(pool.instances().at(0).id != victim);
        CHECK((sky::compute<add>(1, 1) >> pool) == 2);
    }
    CHECK(children() == 0);
}

TEST_CASE(
    "simulated: with default settings a frozen node is lost within 30 s, whatever idle_timeout "
    "is",
    "[simulated]") {
    // api.md section 3: a node whose worker answers nothing is lost within 30 s by default. The
    // default idle_timeout is 600 s; a longer one must not stretch the bound either.
    for (const auto idle : {std::chrono::seconds(600), std::chrono::seconds(7200)}) {
        Recorder rec;
        auto spec = simulated({.faults = {sky::Fault::freeze(0, 500ms)}}, 1, rec);
        spec.idle_timeout = idle;
        sky::ComputePool pool{spec};
        auto call = pool.submit(sky::compute<node_after>(120'000));
        const auto t0 = std::chrono::steady_clock::now();
        REQUIRE(call.wait_for(40s));  // if not, the pool's teardown ends the frozen worker
        const auto waited = std::chrono::steady_clock::now() - t0;
        try {
            call.get();
            FAIL("the call outlived its frozen node");
        } catch (const sky::NodeLostError& e) {
            INFO(e.what());
            CHECK(std::string(e.what()).find("heartbeat") != std::string::npos);
        }
        INFO("idle_timeout " << idle.count() << " s: lost after "
                             << std::chrono::duration<double>(waited).count() << " s");
        CHECK(waited < 30s);
    }
    CHECK(children() == 0);
}

TEST_CASE("simulated: the events come in a cloud's order", "[simulated]") {
    Recorder rec;
    std::vector<std::string> ids;
    {
        sky::ComputePool pool{simulated({}, 2, rec)};
        for (const auto& i : pool.instances()) ids.push_back(i.id);
        CHECK((sky::compute<add>(1, 2) >> pool) == 3);
    }
    const auto names = rec.names();
    auto first = [&](const std::string& n) {
        return std::find(names.begin(), names.end(), n) - names.begin();
    };
    auto last = [&](const std::string& n) {
        auto it = std::find(names.rbegin(), names.rend(), n);
        return names.rend() - it - 1;
    };
    CHECK(first("InfraCreating") == 0);
    CHECK(first("InfraCreated") == 1);
    CHECK(first("InstanceLaunching") == 2);
    CHECK(last("InstanceProvisioned") < first("BootstrapStarting"));
    CHECK(last("BootstrapCompleted") < first("PoolStarted"));
    CHECK(first("PoolStarted") < first("PoolStopping"));
    CHECK(first("PoolStopping") < first("InstanceStopping"));
    CHECK(names.back() == "CostFinal");
    CHECK(std::count(names.begin(), names.end(), "ErrorEvent") == 0);
    // Each node's bootstrap goes through a cloud node's phases, in order.
    for (const auto& id : ids) {
        std::vector<std::string> steps;
        for (const auto& p : rec.all<sky::BootstrapProgress>())
            if (p.instance_id == id) steps.push_back(p.step);
        CHECK(steps == std::vector<std::string>{"check", "upload", "env", "ttl", "done", "worker",
                                                "watchdog"});
    }
    auto provisioned = rec.all<sky::InstanceProvisioned>();
    REQUIRE(provisioned.size() == 2);
    for (const auto& p : provisioned) {
        CHECK(p.provider == "simulated");
        CHECK(p.ip == "127.0.0.1");
        CHECK(p.spot);
    }
    CHECK(children() == 0);
}

TEST_CASE("simulated: costs follow the catalog's prices, on spot and on demand", "[simulated]") {
    double spot_rate = 0, spot_od = 0;
    std::string spot_type;
    {
        Recorder rec;
        {
            sky::ComputePool pool{simulated({.seed = 42}, 1, rec, "always")};
            const auto i = pool.instances().at(0);
            spot_type = i.instance_type;
            CHECK(i.spot);
            spot_rate = i.hourly_price;
            spot_od = i.on_demand_price;
            // On-demand prices are the catalog's; the spot market undercuts them.
            CHECK(spot_od == Approx(catalog_on_demand(i.instance_type)));
            CHECK(spot_rate > 0);
            CHECK(spot_rate < spot_od);
            auto p = rec.all<sky::InstanceProvisioned>().at(0);
            CHECK(p.price_on_demand.value_or(0) == Approx(spot_od));
            REQUIRE(p.price_spot.has_value());
            CHECK(*p.price_spot == Approx(spot_rate));
            std::this_thread::sleep_for(1200ms);
        }
        auto fin = rec.all<sky::CostFinal>();
        REQUIRE(fin.size() == 1);
        CHECK(fin[0].spot_count == 1);
        CHECK(fin[0].ondemand_count == 0);
        CHECK(fin[0].total_cost > 0);
        // One instance: what it cost and what it would have cost on demand are in the ratio of
        // the two prices.
        CHECK((fin[0].total_cost + fin[0].savings_vs_ondemand) / fin[0].total_cost ==
              Approx(spot_od / spot_rate).epsilon(1e-6));
    }
    {
        Recorder rec;
        {
            sky::ComputePool pool{simulated({.seed = 42}, 1, rec, "never")};
            const auto i = pool.instances().at(0);
            CHECK_FALSE(i.spot);
            CHECK(i.hourly_price == Approx(catalog_on_demand(i.instance_type)));
            CHECK(i.hourly_price == Approx(catalog_offers(std::nullopt).front().on_demand_price));
        }
        auto fin = rec.all<sky::CostFinal>();
        REQUIRE(fin.size() == 1);
        CHECK(fin[0].spot_count == 0);
        CHECK(fin[0].ondemand_count == 1);
        CHECK(fin[0].savings_vs_ondemand == 0);
        CHECK(fin[0].total_cost > 0);
    }
    {
        // The same seed quotes the same spot market.
        Recorder rec;
        sky::ComputePool pool{simulated({.seed = 42}, 1, rec, "always")};
        CHECK(pool.instances().at(0).instance_type == spot_type);
        CHECK(pool.instances().at(0).hourly_price == spot_rate);
    }
    CHECK(children() == 0);
}

TEST_CASE("simulated: faults that name no node of the pool are a ConfigError", "[simulated]") {
    Recorder rec;
    CHECK_THROWS_WITH(sky::ComputePool(simulated({.faults = {sky::Fault::preempt(5, 1s)}}, 2, rec)),
                      Catch::Contains("names node 5") && Catch::Contains("0 to 1"));
    CHECK_THROWS_AS(
        sky::ComputePool(simulated({.faults = {sky::Fault::lose_after_calls(0, 0)}}, 1, rec)),
        sky::ConfigError);
    CHECK_THROWS_AS(sky::ComputePool(simulated({.capacity_errors = -1}, 1, rec)), sky::ConfigError);
    CHECK(children() == 0);
}

TEST_CASE("simulated: a fault at 0 s strikes the running pool, not its start", "[simulated]") {
    Recorder rec;
    {
        sky::ComputePool pool{simulated({.faults = {sky::Fault::preempt(0, 0ms)}}, 1, rec)};
        REQUIRE(eventually([&] { return rec.all<sky::InstanceReplaced>().size() == 1; }, 20s));
        CHECK(rec.all<sky::InstancePreempted>().size() == 1);
        CHECK((sky::compute<add>(2, 2).retries(1) >> pool) == 4);
    }
    CHECK(children() == 0);
}
