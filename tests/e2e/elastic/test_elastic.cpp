// Elastic pools and budgets as a user of api.md §4a writes them, on sky::Local and
// sky::Simulated: each case names the rule it checks.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <future>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "e2e/elastic/elastic.hpp"
#include "ledger/ledger.hpp"

using namespace std::chrono_literals;
using namespace elastic_test;

namespace {

sky::PoolSpec local_pool(int nodes, sky::Autoscale a, Recorder& rec) {
    return {.provider = sky::Local{},
            .nodes = nodes,
            .display = display(),
            .on_event = rec.callback(),
            .collect_metrics = false,
            .autoscale = a};
}

sky::PoolSpec simulated_pool(sky::Simulated cloud, int nodes, sky::Autoscale a, sky::Budget b,
                             Recorder& rec) {
    return {.provider = std::move(cloud),
            .nodes = nodes,
            .spot = sky::Spot::Never{},
            .display = display(),
            .on_event = rec.callback(),
            .collect_metrics = false,
            .autoscale = a,
            .budget = b};
}

/// The hourly price of the simulated node a pool gets (the cheapest on-demand offer).
double simulated_price() {
    Recorder rec;
    sky::ComputePool probe{simulated_pool({}, 1, {}, {}, rec)};
    return probe.instances().at(0).hourly_price;
}

}  // namespace

TEST_CASE(
    "elastic: a lazy pool runs no worker until the first call, sleeps at zero after the "
    "window and wakes again as node 0",
    "[elastic][local]") {
    Recorder rec;
    const int before = children();
    sky::ComputePool pool{local_pool(0, {.min = 0, .max = 2, .scaledown_window = 1s}, rec)};
    CHECK(pool.is_active());
    CHECK(pool.instance_count() == 0);
    CHECK(children() == before);  // no worker process
    CHECK(pool.cost() == 0);
    CHECK((sky::compute<node_after>(0) >> pool) == 0);
    CHECK(pool.instance_count() == 1);
    CHECK(children() > before);
    // Idle for the window: back to zero nodes, no worker left, still active.
    REQUIRE(eventually([&] { return pool.instance_count() == 0; }, 10s));
    REQUIRE(eventually([&] { return children() == before; }, 10s));
    CHECK(pool.is_active());
    // The node's index is free once its end is confirmed, a moment after its worker exited
    // (Local reports nothing then: no cost); a call in that moment would wake node 1.
    std::this_thread::sleep_for(1s);
    // Woken again, as node 0.
    CHECK((sky::compute<node_after>(0) >> pool) == 0);
    const auto scaled = rec.all<sky::PoolScaled>();
    REQUIRE(scaled.size() >= 3);
    CHECK(scaled[0].from == 0);
    CHECK(scaled[0].to == 1);
    CHECK(scaled[1].to == 0);
    CHECK(scaled[2].to == 1);
}

TEST_CASE("elastic: a burst reaches max in one decision and never passes it", "[elastic][local]") {
    Recorder rec;
    sky::ComputePool pool{local_pool(0, {.min = 0, .max = 4, .scaledown_window = 30s}, rec)};
    std::vector<sky::PendingCompute<int>> calls;
    for (int i = 0; i < 40; ++i) calls.push_back(sky::compute<node_after>(100));
    const auto nodes = sky::gather(std::move(calls)) >> pool;
    const std::set<int> used(nodes.begin(), nodes.end());
    for (int n : used) CHECK((n >= 0 && n < 4));
    CHECK(used.size() >= 2);
    const auto scaled = rec.all<sky::PoolScaled>();
    REQUIRE(!scaled.empty());
    CHECK(scaled[0].from == 0);
    CHECK(scaled[0].to == 4);  // the whole shortfall at once
    CHECK_THAT(scaled[0].reason, Catch::Contains("40 waiting"));
    for (const auto& s : scaled) CHECK(s.to <= 4);
    CHECK(pool.instance_count() <= 4);
}

TEST_CASE("elastic: resize never kills a running call", "[elastic][local]") {
    Recorder rec;
    sky::ComputePool pool{local_pool(2, {}, rec)};
    auto a = pool.submit(sky::compute<node_after>(1500));
    auto b = pool.submit(sky::compute<node_after>(1500));
    std::this_thread::sleep_for(300ms);
    auto shrink = pool.resize(1);
    CHECK_FALSE(shrink.ready());  // both nodes are busy: the one leaving drains
    std::set<int> ran{a.get(), b.get()};
    CHECK(ran == std::set<int>{0, 1});
    shrink.get();
    CHECK(pool.instance_count() == 1);
    // A fixed pool is fixed at the new size; growing gives a fresh node at the free index.
    pool.resize(2).get();
    CHECK(pool.instance_count() == 2);
    const auto back = sky::compute<node_after>(0) | pool;
    CHECK(back == std::vector<int>{0, 1});
}

TEST_CASE("elastic: drain sends NodeDraining, and a frozen world refuses it until released",
          "[elastic][local]") {
    Recorder rec;
    sky::ComputePool pool{local_pool(3, {}, rec)};
    // A distributed call freezes the world: its three nodes.
    const auto ranks = sky::compute<node_after>(0).with(sky::distributed::jax{}) | pool;
    CHECK(ranks.size() == 3);
    CHECK_THROWS_AS(pool.drain(1), sky::NotResizableError);
    CHECK_THROWS_AS(pool.resize(2), sky::NotResizableError);
    try {
        (void)pool.drain(2);
    } catch (const sky::NotResizableError& e) {
        CHECK_THAT(std::string(e.what()), Catch::Contains("release_world"));
    }
    pool.release_world();
    pool.drain(1).get();
    const auto draining = rec.all<sky::NodeDraining>();
    REQUIRE(draining.size() == 1);
    CHECK(draining[0].node == 1);
    CHECK(!draining[0].instance_id.empty());
    CHECK(pool.instance_count() == 2);
    CHECK_THROWS_AS(pool.drain(7), sky::ConfigError);
    const auto left = sky::compute<node_after>(0) | pool;
    CHECK(left == std::vector<int>{0, 2});
}

TEST_CASE("elastic: bounds are refused by name", "[elastic][local]") {
    Recorder rec;
    auto refused = [&](sky::PoolSpec s, const std::string& name) {
        try {
            sky::ComputePool p{std::move(s)};
            FAIL("accepted: " << name);
        } catch (const sky::ConfigError& e) {
            CHECK_THAT(std::string(e.what()), Catch::Contains(name));
        }
    };
    refused(local_pool(5, {.min = 0, .max = 4}, rec), "nodes (5) is more than autoscale.max (4)");
    refused(local_pool(1, {.min = 3, .max = 4}, rec), "nodes (1) is less than autoscale.min (3)");
    refused(local_pool(1, {.min = 5, .max = 4}, rec), "autoscale.min (5) is more than");
    refused(local_pool(0, {.min = -1, .max = 4}, rec), "autoscale.min must be at least 0");
    refused(local_pool(1, {.min = 0, .max = -2}, rec), "autoscale.max must be in [0, 4096]");
    refused(local_pool(0, {}, rec), "nodes is 0 (a lazy start) but autoscale.max is 0");
    auto b = local_pool(1, {}, rec);
    b.budget.warn_at = 1.5;
    refused(b, "budget.warn_at");
    b.budget = {.max_total_usd = -1};
    refused(b, "budget.max_total_usd");
    auto slurm = local_pool(1, {.min = 0, .max = 2}, rec);
    slurm.provider = sky::Slurm{};
    refused(slurm, "autoscale: a sky::Slurm pool is one job of a fixed size");
    // resize(Autoscale) checks its bounds the same way.
    sky::ComputePool pool{local_pool(1, {.min = 0, .max = 2}, rec)};
    CHECK_THROWS_AS(pool.resize(sky::Autoscale{.min = 3, .max = 2}), sky::ConfigError);
    CHECK_THROWS_AS(pool.resize(-1), sky::ConfigError);
}

TEST_CASE("elastic: resize(Autoscale) replaces the bounds at once, resize(n) is clamped to them",
          "[elastic][local]") {
    Recorder rec;
    sky::ComputePool pool{local_pool(1, {.min = 1, .max = 4, .scaledown_window = 60s}, rec)};
    pool.resize(3).get();
    CHECK(pool.instance_count() == 3);
    pool.resize(sky::Autoscale{.min = 0, .max = 2, .scaledown_window = 1s});
    // Above the new max: idle nodes go, down to zero after the window.
    REQUIRE(eventually([&] { return pool.instance_count() == 0; }, 15s));
    pool.resize(9).get();  // clamped to max = 2
    CHECK(pool.instance_count() == 2);
}

TEST_CASE("elastic: a call's .timeout() counts the wake", "[elastic][simulated]") {
    Recorder rec;
    sky::Simulated slow{.faults = {sky::Fault::slow_bootstrap(0, 4000ms)}};
    sky::ComputePool pool{simulated_pool(slow, 0, {.min = 0, .max = 1}, {}, rec)};
    try {
        (void)(sky::compute<node_after>(0).timeout(800ms) >> pool);
        FAIL("no timeout");
    } catch (const sky::TimeoutError& e) {
        CHECK_THAT(std::string(e.what()), Catch::Contains("waiting for a node"));
    }
    // The node that was woken serves the next call.
    CHECK((sky::compute<node_after>(0) >> pool) == 0);
}

TEST_CASE("elastic: capacity errors during a scale-up are retried, and none left fails the calls",
          "[elastic][simulated]") {
    {
        Recorder rec;
        sky::ComputePool pool{
            simulated_pool({.capacity_errors = 2}, 0, {.min = 0, .max = 2}, {}, rec)};
        CHECK((sky::compute<node_after>(0) >> pool) == 0);
        CHECK(pool.instance_count() >= 1);
    }
    {
        Recorder rec;
        sky::ComputePool pool{
            simulated_pool({.capacity_errors = 100000}, 0, {.min = 0, .max = 2}, {}, rec)};
        const auto t0 = std::chrono::steady_clock::now();
        CHECK_THROWS_AS(sky::compute<node_after>(0) >> pool, sky::ProvisionError);
        CHECK(std::chrono::steady_clock::now() - t0 < 60s);  // never hangs
        CHECK(rec.error_with("scale-up failed (attempt 1 of 3)"));
        CHECK(pool.instance_count() == 0);
    }
}

TEST_CASE("elastic: max_hourly_usd holds the pool at one node", "[elastic][simulated]") {
    const double price = simulated_price();
    REQUIRE(price > 0);
    Recorder rec;
    sky::ComputePool pool{
        simulated_pool({}, 0, {.min = 0, .max = 4}, {.max_hourly_usd = 1.5 * price}, rec)};
    std::vector<sky::PendingCompute<int>> calls;
    for (int i = 0; i < 8; ++i) calls.push_back(sky::compute<node_after>(200));
    const auto nodes = sky::gather(std::move(calls)) >> pool;
    CHECK(std::set<int>(nodes.begin(), nodes.end()) == std::set<int>{0});
    for (const auto& s : rec.all<sky::PoolScaled>()) CHECK(s.to <= 1);
    CHECK(rec.error_with("max_hourly_usd"));
}

TEST_CASE("elastic: a budget warns, then stops every call and node within a billing unit",
          "[elastic][simulated]") {
    const double price = simulated_price();
    REQUIRE(price > 0);
    // About three seconds of one node (Simulated bills per second).
    const double limit = price * 3.0 / 3600.0;
    Recorder rec;
    std::optional<sky::ComputePool> pool;
    pool.emplace(
        simulated_pool({}, 0, {.min = 0, .max = 1}, {.max_total_usd = limit, .warn_at = 0.5}, rec));
    auto running = pool->submit(sky::compute<node_after>(30000));
    try {
        (void)running.get();
        FAIL("the call outlived the budget");
    } catch (const sky::BudgetExceededError& e) {
        CHECK(e.limit() == Approx(limit));
        CHECK(e.spent() >= limit);
    }
    // Later calls fail the same way; nothing is launched again.
    CHECK_THROWS_AS(sky::compute<node_after>(0) >> *pool, sky::BudgetExceededError);
    CHECK_THROWS_AS(pool->resize(1), sky::BudgetExceededError);
    const auto warned = rec.all<sky::BudgetWarning>();
    REQUIRE(warned.size() == 1);
    CHECK(warned[0].limit_usd == Approx(limit));
    CHECK(warned[0].spent_usd >= 0.5 * limit);
    REQUIRE(eventually([&] { return pool->instance_count() == 0; }, 10s));
    pool.reset();
    const auto fin = rec.all<sky::CostFinal>();
    REQUIRE(fin.size() == 1);
    // At most one billing unit (1 s) per node live at the stop, plus the seconds teardown takes
    // to confirm (a simulated machine ends in well under 2 s) and the supervisor's tick.
    CHECK(fin[0].total_cost >= limit);
    CHECK(fin[0].total_cost <= limit + price * 4.0 / 3600.0);
}

TEST_CASE("elastic: the final cost is the nodes' lifetimes times their prices",
          "[elastic][simulated]") {
    const double price = simulated_price();
    Recorder rec;
    std::optional<sky::ComputePool> pool;
    pool.emplace(simulated_pool({}, 0, {.min = 0, .max = 2, .scaledown_window = 1s}, {}, rec));
    std::vector<sky::PendingCompute<int>> calls;
    for (int i = 0; i < 4; ++i) calls.push_back(sky::compute<node_after>(1000));
    (void)(sky::gather(std::move(calls)) >> *pool);
    // No node serves (instance_count) before its end is confirmed, when its cost stops: wait
    // for both, the cost then no longer moves.
    REQUIRE(eventually(
        [&] {
            const double a = pool->cost();
            std::this_thread::sleep_for(200ms);
            return pool->instance_count() == 0 && pool->cost() == a;
        },
        15s));
    const double before_close = pool->cost();
    pool.reset();
    const auto fin = rec.all<sky::CostFinal>();
    REQUIRE(fin.size() == 1);
    // Both nodes ended by scale-down before the pool closed: nothing accrued after.
    CHECK(fin[0].total_cost == Approx(before_close));
    // Each node lived from its launch to its confirmed end: at least its calls' second and the
    // window, at most that plus a few seconds of start and teardown each.
    std::vector<std::string> ids;
    for (const auto& p : rec.all<sky::InstanceProvisioned>()) ids.push_back(p.instance_id);
    REQUIRE(ids.size() == 2);
    const auto events = [&] {
        std::lock_guard lk(rec.m);
        return rec.events;
    }();
    double lifetimes = 0;
    for (const auto& id : ids) {
        std::optional<Recorder::Clock::time_point> from, to;
        for (const auto& [t, e] : events) {
            if (auto* c = std::get_if<sky::InstanceProvisioned>(&e); c && c->instance_id == id)
                from = t;
            if (auto* s = std::get_if<sky::InstanceStopping>(&e); s && s->instance_id == id) to = t;
        }
        REQUIRE(from);
        REQUIRE(to);
        lifetimes += std::chrono::duration<double>(*to - *from).count();
    }
    // Billed per second from the launch to the confirmed end: within a second or two per node
    // of what the events show.
    CHECK(fin[0].total_cost == Approx(lifetimes * price / 3600.0).margin(4.0 * price / 3600.0));
}

TEST_CASE(
    "elastic: a distributed call on nodes 0 and 2 ranks them 0 and 1, and a node that joins "
    "later stays out of that world until it is released",
    "[elastic][local]") {
    Recorder rec;
    sky::ComputePool pool{local_pool(3, {}, rec)};
    pool.drain(1).get();  // nodes {0, 2} live: a gap at index 1
    REQUIRE(pool.instance_count() == 2);
    auto ranks = sky::compute<torch_rank>().with(sky::distributed::torch{"gloo"}) | pool;
    std::sort(ranks.begin(), ranks.end());
    REQUIRE(ranks.size() == 2);
    // "node rank world node_rank master_port": ranks 0..world-1, NODE_RANK the position.
    const auto port = ranks[0].substr(ranks[0].rfind(' ') + 1);
    CHECK(ranks[0] == "0 0 2 0 " + port);
    CHECK(ranks[1] == "2 1 2 1 " + port);
    auto tf = sky::compute<tf_rank>().with(sky::distributed::tensorflow{}) | pool;
    std::sort(tf.begin(), tf.end());
    CHECK(tf == std::vector<std::string>{"2 0", "2 1"});
    // Node 1 joins again (the lowest free index); the frozen world keeps its two nodes.
    pool.resize(3).get();
    REQUIRE(pool.instance_count() == 3);
    auto again = sky::compute<torch_rank>().with(sky::distributed::torch{"gloo"}) | pool;
    std::sort(again.begin(), again.end());
    CHECK(again == ranks);
    // Released, the next distributed call freezes all three.
    pool.release_world();
    auto all = sky::compute<torch_rank>().with(sky::distributed::torch{"gloo"}) | pool;
    std::sort(all.begin(), all.end());
    REQUIRE(all.size() == 3);
    const auto port3 = all[0].substr(all[0].rfind(' ') + 1);
    CHECK(all[0] == "0 0 3 0 " + port3);
    CHECK(all[1] == "1 1 3 1 " + port3);
    CHECK(all[2] == "2 2 3 2 " + port3);
}

TEST_CASE(
    "elastic: a distributed call on a sleeping pool wakes one node as its world and runs there",
    "[elastic][local]") {
    Recorder rec;
    const int before = children();
    sky::ComputePool pool{local_pool(0, {.min = 0, .max = 3, .scaledown_window = 30s}, rec)};
    CHECK(children() == before);
    const auto ranks = sky::compute<torch_rank>().with(sky::distributed::torch{"gloo"}) | pool;
    REQUIRE(ranks.size() == 1);
    CHECK(ranks[0].rfind("0 0 1 0 ", 0) == 0);  // node 0, rank 0 of a world of 1
    CHECK(pool.instance_count() == 1);
    const auto scaled = rec.all<sky::PoolScaled>();
    REQUIRE(!scaled.empty());
    CHECK(scaled[0].from == 0);
    CHECK(scaled[0].to == 1);
    CHECK_THAT(scaled[0].reason, Catch::Contains("distributed call"));
    // That world is frozen: its node is never drained while it holds.
    CHECK_THROWS_AS(pool.drain(0), sky::NotResizableError);
}

TEST_CASE(
    "elastic: a distributed call while min's nodes still join takes them all as its world, and "
    "its .timeout() counts the wake",
    "[elastic][simulated]") {
    {
        Recorder rec;
        sky::Simulated slow{.faults = {sky::Fault::slow_bootstrap(0, 2000ms),
                                       sky::Fault::slow_bootstrap(1, 2000ms)}};
        sky::ComputePool pool{simulated_pool(slow, 0, {.min = 0, .max = 3}, {}, rec)};
        pool.resize(sky::Autoscale{.min = 2, .max = 3, .scaledown_window = 30s});
        // Both of min's nodes are joining: the call's world is those two, not the one that
        // happens to be ready first.
        auto ranks = sky::compute<torch_rank>().with(sky::distributed::torch{"gloo"}) | pool;
        std::sort(ranks.begin(), ranks.end());
        REQUIRE(ranks.size() == 2);
        const auto port = ranks[0].substr(ranks[0].rfind(' ') + 1);
        CHECK(ranks[0] == "0 0 2 0 " + port);
        CHECK(ranks[1] == "1 1 2 1 " + port);
        for (const auto& s : rec.all<sky::PoolScaled>()) CHECK(s.to <= 2);
    }
    {
        Recorder rec;
        sky::Simulated slow{.faults = {sky::Fault::slow_bootstrap(0, 4000ms)}};
        sky::ComputePool pool{simulated_pool(slow, 0, {.min = 0, .max = 1}, {}, rec)};
        const auto t0 = std::chrono::steady_clock::now();
        try {
            (void)(sky::compute<torch_rank>().with(sky::distributed::torch{"gloo"}).timeout(800ms) |
                   pool);
            FAIL("no timeout");
        } catch (const sky::TimeoutError& e) {
            CHECK_THAT(std::string(e.what()), Catch::Contains("waiting for a node"));
        }
        CHECK(std::chrono::steady_clock::now() - t0 < 3s);
        // The world it woke serves the next distributed call.
        const auto ranks = sky::compute<torch_rank>().with(sky::distributed::torch{"gloo"}) | pool;
        REQUIRE(ranks.size() == 1);
        CHECK(ranks[0].rfind("0 0 1 0 ", 0) == 0);
    }
}

TEST_CASE(
    "elastic: a distributed call whose world cannot be launched fails with the ProvisionError",
    "[elastic][simulated]") {
    Recorder rec;
    sky::ComputePool pool{
        simulated_pool({.capacity_errors = 100000}, 0, {.min = 0, .max = 2}, {}, rec)};
    const auto t0 = std::chrono::steady_clock::now();
    CHECK_THROWS_AS(sky::compute<torch_rank>().with(sky::distributed::torch{"gloo"}) | pool,
                    sky::ProvisionError);
    CHECK(std::chrono::steady_clock::now() - t0 < 60s);  // never hangs
    CHECK(rec.error_with("scale-up failed (attempt 3 of 3)"));
    CHECK(pool.instance_count() == 0);
}

TEST_CASE("elastic: a woken node is billed from its launch, its bootstrap included",
          "[elastic][simulated]") {
    const double price = simulated_price();
    REQUIRE(price > 0);
    Recorder rec;
    std::optional<sky::ComputePool> pool;
    sky::Simulated slow{.faults = {sky::Fault::slow_bootstrap(0, 3000ms)}};
    pool.emplace(simulated_pool(slow, 0, {.min = 0, .max = 1, .scaledown_window = 1s}, {}, rec));
    CHECK((sky::compute<node_after>(0) >> *pool) == 0);
    // The node is scaled down after the window; the CostUpdate after its confirmed end carries
    // no hourly rate.
    const auto ended = [&]() -> std::optional<std::pair<Recorder::Clock::time_point, double>> {
        std::lock_guard lk(rec.m);
        for (const auto& [t, e] : rec.events)
            if (auto* c = std::get_if<sky::CostUpdate>(&e);
                c && c->hourly_rate == 0 && c->accumulated_cost > 0)
                return std::pair{t, c->accumulated_cost};
        return std::nullopt;
    };
    REQUIRE(eventually([&] { return pool->instance_count() == 0 && ended(); }, 20s));
    std::optional<Recorder::Clock::time_point> launched, answered;
    {
        std::lock_guard lk(rec.m);
        for (const auto& [t, e] : rec.events) {
            if (std::holds_alternative<sky::InstanceProvisioned>(e)) launched = t;
            if (std::holds_alternative<sky::BootstrapCompleted>(e)) answered = t;
        }
    }
    REQUIRE(launched);
    REQUIRE(answered);
    CHECK(*answered - *launched >= 2500ms);  // the wake's slow bootstrap
    const auto [end, billed] = *ended();
    const double lifetime = std::chrono::duration<double>(end - *launched).count();
    // Per second, rounded up, from the launch: the bootstrap's 3 s are in it.
    CHECK(billed == Approx(std::ceil(lifetime) * price / 3600.0).margin(1.2 * price / 3600.0));
    pool.reset();
    const auto fin = rec.all<sky::CostFinal>();
    REQUIRE(fin.size() == 1);
    CHECK(fin[0].total_cost == Approx(billed));
}

TEST_CASE("elastic: the ledger records a pool's budget and what it has spent, for sky ls",
          "[elastic][simulated]") {
    const double price = simulated_price();
    REQUIRE(price > 0);
    Recorder rec;
    std::optional<sky::ComputePool> pool;
    pool.emplace(simulated_pool({}, 0, {.min = 0, .max = 1},
                                {.max_total_usd = 5.0, .max_hourly_usd = 100.0}, rec));
    const std::string id = pool->id();
    const auto record = [&]() -> std::optional<sky::detail::LedgerRecord> {
        for (auto& r : sky::detail::Ledger::read_all())
            if (r.pool_id == id) return r;
        return std::nullopt;
    };
    const auto at_start = record();
    REQUIRE(at_start);
    CHECK(at_start->limit_usd == 5.0);
    CHECK(at_start->hourly_limit_usd == 100.0);
    CHECK_FALSE(at_start->spent_usd.has_value());  // no node yet, nothing spent
    CHECK((sky::compute<node_after>(0) >> *pool) == 0);
    // While the node runs, its spend reaches the ledger within the supervisor's next ticks.
    REQUIRE(eventually(
        [&] {
            const auto r = record();
            return r && r->spent_usd && *r->spent_usd > 0;
        },
        5s));
    pool.reset();
    const auto fin = rec.all<sky::CostFinal>();
    REQUIRE(fin.size() == 1);
    const auto at_end = record();
    REQUIRE(at_end);
    REQUIRE(at_end->spent_usd);
    CHECK(at_end->closed);
    // Written at teardown once every machine was confirmed ended: the final cost, give or take
    // the moment between the two.
    CHECK(*at_end->spent_usd == Approx(fin[0].total_cost).margin(2.0 * price / 3600.0));
}
