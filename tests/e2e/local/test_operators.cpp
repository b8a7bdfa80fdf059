// Every operator and method on a real Local pool.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>

#include "e2e/local/functions.hpp"
#include "pool/backend.hpp"
#include "pool/pool_core.hpp"
#include "providers/registry/registry.hpp"

using namespace e2e;
using namespace std::chrono_literals;

namespace {

using Clock = std::chrono::steady_clock;

// What a pool's events said, with the time each arrived.
struct Seen {
    std::mutex m;
    std::optional<Clock::time_point> bootstrap_began, bootstrap_ended;
    bool started = false;
    bool stopping = false;
    std::optional<sky::CostFinal> cost;
    std::vector<std::string> provisioned, stopped;

    sky::Callback callback() {
        return [this](const sky::Event& e) -> std::optional<sky::Event> {
            std::lock_guard lk(m);
            const auto now = Clock::now();
            if (std::holds_alternative<sky::BootstrapStarting>(e) && !bootstrap_began)
                bootstrap_began = now;
            if (std::holds_alternative<sky::BootstrapCompleted>(e)) bootstrap_ended = now;
            if (std::holds_alternative<sky::PoolStarted>(e)) started = true;
            if (std::holds_alternative<sky::PoolStopping>(e)) stopping = true;
            if (auto* p = std::get_if<sky::InstanceProvisioned>(&e))
                provisioned.push_back(p->instance_id);
            if (auto* s = std::get_if<sky::InstanceStopping>(&e)) stopped.push_back(s->instance_id);
            if (auto* c = std::get_if<sky::CostFinal>(&e)) cost = *c;
            return std::nullopt;
        };
    }
};

// A one-node pool on sky::Simulated whose bootstrap takes `delay` (and then fails with `fail`).
sky::PoolSpec slow_pool(std::chrono::milliseconds delay, Seen& seen,
                        std::optional<std::string> fail = std::nullopt) {
    sky::Simulated cloud{.faults = {sky::Fault::slow_bootstrap(0, delay)}};
    if (fail) cloud.faults.push_back(sky::Fault::fail_bootstrap(0, *fail));
    return {.provider = cloud,
            .nodes = 1,
            .spot = sky::Spot::Never{},
            .display = sky::Display::quiet,
            .on_event = seen.callback(),
            .collect_metrics = false};
}

// Local's backend, except that after stop_all() it names a machine it could not confirm
// stopped (as a cloud does when a terminate is not confirmed in time).
class UnconfirmedStop final : public sky::detail::Backend {
public:
    explicit UnconfirmedStop(std::unique_ptr<sky::detail::Backend> real) : real_(std::move(real)) {}
    void provision(int nodes, const std::function<void(sky::Event)>& emit) override {
        real_->provision(nodes, emit);
    }
    sky::detail::NodeStart connect(int node, const std::function<void(sky::Event)>& emit) override {
        return real_->connect(node, emit);
    }
    sky::detail::NodeExit exit_reason(int node) override { return real_->exit_reason(node); }
    [[nodiscard]] bool can_restart(int node) const override { return real_->can_restart(node); }
    void begin_stop() noexcept override { real_->begin_stop(); }
    void stop_all() noexcept override { real_->stop_all(); }
    [[nodiscard]] std::vector<std::string> leftovers() const override {
        return {"local machine m-7 (tag sky:pool=test)"};
    }

private:
    std::unique_ptr<sky::detail::Backend> real_;
};

}  // namespace

TEST_CASE(">> runs one call and returns its typed result", "[local][operators]") {
    sky::ComputePool pool{quiet(2)};
    CHECK((sky::compute<add>(2, 3) >> pool) == 5);
    CHECK((sky::compute<mean>(std::vector<double>{1, 2, 3, 6}) >> pool) == 3.0);
    CHECK((sky::compute<concat>("ab", std::string("c"), 2) >> pool) == "abcabc");
    CHECK((sky::compute<scale>(Vec3{1, 2, 3}, 2.0) >> pool) == Vec3{2, 4, 6});
    sky::compute<nothing>() >> pool;  // void
    CHECK(pool.run(sky::compute<add>(1, 1)) == 2);
}

TEST_CASE("| broadcasts to every node, results in node order", "[local][operators]") {
    sky::ComputePool pool{quiet(3)};
    std::vector<int> nodes = sky::compute<node_index>() | pool;
    CHECK(nodes == std::vector<int>{0, 1, 2});
    std::vector<sky::InstanceInfo> infos = sky::compute<info>() | pool;
    REQUIRE(infos.size() == 3);
    std::set<int> seen;
    for (std::size_t i = 0; i < infos.size(); ++i) {
        CHECK(infos[i].node == static_cast<int>(i));
        CHECK(infos[i].total_nodes == 3);
        CHECK(infos[i].is_head == (i == 0));
        CHECK(infos[i].job_id == pool.id());
        CHECK(infos[i].workers_per_node == 1);
        CHECK(infos[i].head_addr == "127.0.0.1");
        seen.insert(infos[i].node);
    }
    CHECK(seen.size() == 3);
    sky::compute<nothing>() | pool;  // void broadcast returns void
    CHECK(pool.broadcast(sky::compute<add>(1, 2)) == std::vector<int>{3, 3, 3});
}

TEST_CASE("& and gather run in parallel with typed results", "[local][operators]") {
    sky::ComputePool pool{quiet(2, 2)};
    auto [a, b, c] = (sky::compute<add>(1, 2) & sky::compute<concat>("x", "y", 1) &
                      sky::compute<mean>(std::vector<double>{2, 4})) >>
                     pool;
    CHECK(a == 3);
    CHECK(b == "xy");
    CHECK(c == 3.0);
    auto [v, n] = (sky::compute<nothing>() & sky::compute<add>(5, 5)) >> pool;
    STATIC_REQUIRE(std::is_same_v<decltype(v), std::monostate>);
    CHECK(n == 10);
    auto [x, y, z] =
        sky::gather(sky::compute<add>(1, 1), sky::compute<add>(2, 2), sky::compute<add>(3, 3)) >>
        pool;
    CHECK(x + y + z == 12);
    auto t = pool.run_batch(sky::compute<add>(0, 1) & sky::compute<add>(0, 2));
    CHECK(std::get<1>(t) == 2);
    // & chains on either side.
    auto [p, q, r, s] = ((sky::compute<add>(1, 0) & sky::compute<add>(2, 0)) &
                         (sky::compute<add>(3, 0) & sky::compute<add>(4, 0))) >>
                        pool;
    CHECK(p + q + r + s == 10);
}

TEST_CASE("gather of a vector returns results in input order", "[local][operators]") {
    sky::ComputePool pool{quiet(3, 2)};
    std::vector<sky::PendingCompute<int>> calls;
    for (int i = 0; i < 2000; ++i) calls.push_back(sky::compute<add>(i, 1));
    std::vector<int> out = sky::gather(std::move(calls)) >> pool;
    REQUIRE(out.size() == 2000);
    for (int i = 0; i < 2000; ++i) REQUIRE(out[static_cast<std::size_t>(i)] == i + 1);
    std::vector<sky::PendingCompute<int>> none;
    CHECK((sky::gather(std::move(none)) >> pool).empty());
}

TEST_CASE("the work is spread over every node", "[local][operators]") {
    sky::ComputePool pool{quiet(3)};
    std::vector<sky::PendingCompute<int>> calls;
    for (int i = 0; i < 30; ++i) calls.push_back(sky::compute<node_index>());
    auto nodes = sky::gather(std::move(calls)) >> pool;
    CHECK(std::set<int>(nodes.begin(), nodes.end()).size() == 3);
}

TEST_CASE("submit returns a Future: get, ready, wait_for, cancel", "[local][operators]") {
    sky::ComputePool pool{quiet(1, 2)};
    auto f = pool.submit(sky::compute<add>(20, 22));
    CHECK(f.get() == 42);
    CHECK(f.ready());
    auto slow = pool.submit(sky::compute<sleep_ms>(300));
    CHECK_FALSE(slow.wait_for(std::chrono::milliseconds(1)));
    CHECK(slow.get() == 300);
    auto batch = pool.submit(sky::compute<add>(1, 1) & sky::compute<add>(2, 2));
    CHECK(std::get<1>(batch.get()) == 4);
    std::vector<sky::PendingCompute<int>> v{sky::compute<add>(1, 2), sky::compute<add>(3, 4)};
    auto g = pool.submit(sky::gather(v));
    CHECK(g.get() == std::vector<int>{3, 7});
    // Cancel a call that cannot start yet (both slots are busy).
    auto busy1 = pool.submit(sky::compute<sleep_ms>(400));
    auto busy2 = pool.submit(sky::compute<sleep_ms>(400));
    auto queued = pool.submit(sky::compute<sleep_ms>(5000));
    CHECK(queued.cancel());
    CHECK_THROWS_AS(queued.get(), sky::CancelledError);
    CHECK(busy1.get() + busy2.get() == 800);
}

TEST_CASE("concurrency runs calls at once on one node, each in its own slot",
          "[local][operators]") {
    TempDir d;
    sky::ComputePool pool{quiet(1, 2)};
    auto [w1, w2] =
        (sky::compute<rendezvous>(d.path, "a", "b") & sky::compute<rendezvous>(d.path, "b", "a")) >>
        pool;
    CHECK(w1 != w2);  // two threads of the one worker process
}

TEST_CASE("a large argument and result travel intact", "[local][operators]") {
    sky::ComputePool pool{quiet(1)};
    std::vector<float> big(16 << 20);  // 64 MiB
    for (std::size_t i = 0; i < big.size(); i += 4096) big[i] = static_cast<float>(i);
    big.back() = 7.0f;
    auto back = sky::compute<echo>(big) >> pool;
    CHECK(back == big);
}

TEST_CASE("PoolSpec::env reaches the worker", "[local][operators]") {
    sky::ComputePool pool{{.nodes = 1,
                           .image = sky::Image{.env = {{"FROM_IMAGE", "img"}}},
                           .env = {{"SKY_TEST_VALUE", "forty two"}},
                           .display = sky::Display::quiet}};
    CHECK((sky::compute<getenv_of>("SKY_TEST_VALUE") >> pool) == "forty two");
    CHECK((sky::compute<getenv_of>("FROM_IMAGE") >> pool) == "img");
    CHECK((sky::compute<getenv_of>("SKY_WORKER_TOKEN") >> pool) == "<unset>");  // never leaked
}

TEST_CASE("pool methods: instances, is_active, close, move", "[local][operators]") {
    Seen seen;
    auto spec = quiet(2);
    spec.on_event = seen.callback();
    sky::ComputePool pool{spec};
    CHECK(pool.is_active());
    CHECK(pool.instance_count() == 2);
    auto inst = pool.instances();
    REQUIRE(inst.size() == 2);
    CHECK(inst[0].node == 0);
    CHECK(inst[1].provider == "local");
    CHECK(inst[0].id != inst[1].id);
    CHECK(live_children() == 2);
    sky::ComputePool moved = std::move(pool);
    CHECK((sky::compute<add>(1, 2) >> moved) == 3);
    moved.close();
    // close() returns when the teardown is done: the workers are gone and every teardown
    // event has been delivered, each node's stop included.
    CHECK_FALSE(moved.is_active());
    CHECK(moved.instance_count() == 0);
    CHECK(live_children() == 0);
    {
        std::lock_guard lk(seen.m);
        CHECK(seen.stopping);
        CHECK(std::set<std::string>(seen.stopped.begin(), seen.stopped.end()) ==
              std::set<std::string>{inst[0].id, inst[1].id});
        REQUIRE(seen.cost);
        CHECK(seen.cost->total_cost == 0.0);  // Local machines are free
        CHECK(seen.cost->total_seconds > 0);
    }
    CHECK_THROWS_AS(sky::compute<add>(1, 2) >> moved, sky::Error);
    moved.close();  // twice is fine
    std::lock_guard lk(seen.m);
    CHECK(seen.stopped.size() == 2);  // and stops nothing again
}

TEST_CASE("close reports what it could not confirm stopped and the pool is closed anyway",
          "[local][operators]") {
    auto spec = quiet(1);
    auto core = std::make_shared<sky::detail::PoolCore>(
        spec,
        std::make_unique<UnconfirmedStop>(sky::detail::descriptor_for(spec.provider)
                                              .make_backend({spec, "test-unconfirmed", nullptr})));
    core->start();
    REQUIRE(core->instance_count() == 1);
    try {
        core->close(true);  // what ComputePool::close() does
        FAIL("close reported nothing");
    } catch (const sky::Error& e) {
        std::string what = e.what();
        INFO(what);
        CHECK(what.find("could not confirm that these stopped: local machine m-7") !=
              std::string::npos);
        CHECK(what.find("sky gc") != std::string::npos);
    }
    CHECK_FALSE(core->active());
    CHECK(live_children() == 0);
    core->close(false);  // the destructor's way: never throws
}

TEST_CASE("MultiPool provisions pools in parallel", "[local][operators]") {
    // Each pool's node takes 2 s to bootstrap. One after the other, the pools would take 4 s or
    // more and their bootstraps would not overlap.
    Seen a, b;
    const auto t0 = Clock::now();
    sky::MultiPool multi{slow_pool(2000ms, a), slow_pool(2000ms, b)};
    const auto took = Clock::now() - t0;
    auto& [pa, pb] = multi;
    CHECK(multi.size() == 2);
    CHECK(pa.instance_count() == 1);
    CHECK(pb.instance_count() == 1);
    CHECK((sky::compute<add>(1, 1) >> multi[1]) == 2);
    std::scoped_lock lk(a.m, b.m);
    REQUIRE(a.bootstrap_began);
    REQUIRE(a.bootstrap_ended);
    REQUIRE(b.bootstrap_began);
    REQUIRE(b.bootstrap_ended);
    CHECK(*a.bootstrap_began < *b.bootstrap_ended);
    CHECK(*b.bootstrap_began < *a.bootstrap_ended);
    CHECK(took >= 2000ms);
    CHECK(took < 4000ms);
}

TEST_CASE("MultiPool: a pool that fails tears down the others and its error is thrown",
          "[local][operators]") {
    // The good pool (Local, 2 nodes) is up long before the other's bootstrap fails after 1 s.
    Seen good, bad;
    auto good_spec = quiet(2);
    good_spec.on_event = good.callback();
    try {
        sky::MultiPool multi{good_spec,
                             slow_pool(1000ms, bad, "E: Unable to locate package sky-nope")};
        FAIL("the MultiPool started with a failing pool");
    } catch (const sky::BootstrapError& e) {
        CHECK(e.node() == 0);
        CHECK(std::string(e.what()).find("sky-nope") != std::string::npos);
    }
    CHECK(live_children() == 0);  // every worker of both pools
    std::scoped_lock lk(good.m, bad.m);
    CHECK(good.started);
    CHECK(good.stopping);
    REQUIRE(good.provisioned.size() == 2);
    CHECK(std::set<std::string>(good.stopped.begin(), good.stopped.end()) ==
          std::set<std::string>(good.provisioned.begin(), good.provisioned.end()));
    CHECK_FALSE(bad.started);
}

TEST_CASE("parameters by const reference, lvalue reference and rvalue reference",
          "[local][operators]") {
    sky::ComputePool pool{quiet(1)};
    std::vector<int> v{1, 2};
    CHECK((sky::compute<by_ref>(std::string("a"), v, std::string("c")) >> pool) == "a3c");
    CHECK(v.size() == 2);  // the remote call changed its own copy
}

TEST_CASE("a Future that outlives its pool can still be asked to cancel", "[local][operators]") {
    std::optional<sky::Future<int>> f;
    {
        sky::ComputePool pool{quiet(1)};
        f = pool.submit(sky::compute<add>(1, 2));
        CHECK(f->get() == 3);
    }
    CHECK_FALSE(f->cancel());
    CHECK(f->ready());
}
