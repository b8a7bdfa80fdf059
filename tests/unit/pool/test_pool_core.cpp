// The pool's supervisor (pool/pool_core.hpp) over a fake backend (tests/fakes/pool): its nodes
// are scripted workers on socketpairs, so a node's life (ready, reconnecting, resyncing,
// replacing, lost) runs through PoolCore without a process or a machine. Each case says what the
// worker does and checks what the caller and the events see.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fakes/pool/fake_backend.hpp"
#include "pool/pool_core.hpp"
#include "sky/init.hpp"
#include "support/temp_home.hpp"

using namespace sky::detail;
using namespace std::chrono_literals;
using sky::test::FakeBackend;
using sky::test::FakeWorker;

namespace {

/// The events a pool emitted, in order (they arrive on the pool's event thread).
struct Events {
    std::mutex m;
    std::condition_variable cv;
    std::vector<sky::Event> seen;

    /// Waits up to 10 s for an error event whose message contains `text`.
    bool error_with(const std::string& text) {
        std::unique_lock lk(m);
        return cv.wait_for(lk, 10s, [&] {
            for (auto& e : seen)
                if (auto* x = std::get_if<sky::ErrorEvent>(&e);
                    x && x->message.find(text) != std::string::npos)
                    return true;
            return false;
        });
    }
    /// Waits up to 10 s for a replacement of node `node`.
    std::optional<sky::InstanceReplaced> replaced(int node) {
        std::unique_lock lk(m);
        std::optional<sky::InstanceReplaced> r;
        cv.wait_for(lk, 10s, [&] {
            for (auto& e : seen)
                if (auto* x = std::get_if<sky::InstanceReplaced>(&e); x && x->node == node) r = *x;
            return r.has_value();
        });
        return r;
    }
};

/// A pool over `backend`, with `events` recording what it emits.
std::shared_ptr<PoolCore> make_pool(std::unique_ptr<FakeBackend> backend, Events& events,
                                    int nodes = 1,
                                    const std::function<void(sky::PoolSpec&)>& tune = {}) {
    static char name[] = "sky_test_pool_core";
    static char* argv[] = {name, nullptr};
    sky::init(1, argv);  // a pool refuses to start in a program that did not call it
    sky::PoolSpec spec;
    spec.nodes = nodes;
    spec.display = sky::Display::quiet;
    spec.on_event = [&events](const sky::Event& e) -> std::optional<sky::Event> {
        std::lock_guard lk(events.m);
        events.seen.push_back(e);
        events.cv.notify_all();
        return std::nullopt;
    };
    if (tune) tune(spec);
    return std::make_shared<PoolCore>(std::move(spec), std::move(backend));
}

/// A pool over a fake backend: script `fake`, then start().
struct FakePool {
    sky::test::TempSkyHome home;
    Events events;
    std::unique_ptr<FakeBackend> owned = std::make_unique<FakeBackend>();
    FakeBackend* fake = owned.get();
    std::shared_ptr<PoolCore> pool;

    std::function<void(sky::PoolSpec&)> tune;

    void start(int nodes = 1) {
        pool = make_pool(std::move(owned), events, nodes, tune);
        pool->start();
    }
};

/// A worker that greets and answers every call with its own arguments.
sky::test::WorkerScript echo_worker() {
    return [](FakeWorker& w) {
        w.greet();
        w.echo();
    };
}

Buffer bytes(const std::string& s) {
    Buffer b;
    b.append(s.data(), s.size());
    return b;
}

std::string text(const Buffer& b) { return {reinterpret_cast<const char*>(b.data()), b.size()}; }

/// One call of "echo" with `arg` as its argument bytes.
std::shared_ptr<BatchState> call(PoolCore& pool, const std::string& arg, int retries = 0) {
    CallDesc c;
    c.function = "echo";
    auto args = make_shared_buffer();
    *args = bytes(arg);
    c.args = args;
    c.options.retries = retries;
    return pool.submit({&c}, false);
}

/// The error message of a failed call, or "" when it did not fail.
std::string error_of(const Outcome& o) {
    if (!o.error) return {};
    try {
        std::rethrow_exception(o.error);
    } catch (const std::exception& e) {
        return e.what();
    }
}

/// Drops the worker's end after reading one call; the call's id and arguments go to `kept`.
struct FirstCall {
    std::mutex m;
    std::uint64_t id = 0;
    Buffer args;
};
sky::test::WorkerScript read_one_then_drop(std::shared_ptr<FirstCall> kept) {
    return [kept](FakeWorker& w) {
        w.greet();
        if (auto id = w.next_call()) {
            std::lock_guard lk(kept->m);
            kept->id = *id;
            kept->args.clear();
            kept->args.append(w.args().span().data(), w.args().size());
        }
        w.close();
    };
}

}  // namespace

TEST_CASE("pool core: a call runs on a fake node and its result comes back", "[pool_core]") {
    FakePool p;
    auto* fake = p.fake;
    fake->on_connect(0, echo_worker());
    fake->on_connect(1, echo_worker());
    p.start(2);
    auto& pool = p.pool;
    CHECK(pool->instance_count() == 2);
    auto a = call(*pool, "one");
    auto b = call(*pool, "two");
    REQUIRE(a->wait_for(10s));
    REQUIRE(b->wait_for(10s));
    CHECK(text(a->outcomes[0].result) == "one");
    CHECK(text(b->outcomes[0].result) == "two");
    CHECK(fake->connects(0) == 1);
    CHECK(fake->connects(1) == 1);
    pool->close(true);
    CHECK(fake->stopped());
}

TEST_CASE("pool core: a lost node that cannot be replaced fails its call with the backend's word",
          "[pool_core]") {
    FakePool p;
    auto* fake = p.fake;
    fake->rules(0, {.can_restart = false,
                    .can_reconnect = false,
                    .exit = {sky::NodeLostError::Reason::unreachable,
                             "the fake machine was switched off", std::nullopt}});
    fake->on_connect(0, read_one_then_drop(std::make_shared<FirstCall>()));
    p.start();
    auto& pool = p.pool;
    auto a = call(*pool, "lost");
    REQUIRE(a->wait_for(10s));
    const auto why = error_of(a->outcomes[0]);
    CHECK_THAT(why, Catch::Contains("the fake machine was switched off"));
    CHECK(p.events.error_with("node 0 lost: the fake machine was switched off"));
    CHECK(pool->instance_count() == 0);
    // With no node left, a later call fails at once, naming why.
    auto b = call(*pool, "later");
    REQUIRE(b->wait_for(1s));
    CHECK_THAT(error_of(b->outcomes[0]), Catch::Contains("every node of the pool is lost"));
    CHECK(fake->connects(0) == 1);
    pool->close(false);
}

TEST_CASE("pool core: a lost node is replaced and its call retried on the replacement",
          "[pool_core]") {
    FakePool p;
    auto* fake = p.fake;
    fake->rules(0, {.can_restart = true});
    fake->on_connect(0, read_one_then_drop(std::make_shared<FirstCall>()));
    fake->on_connect(0, echo_worker());
    p.start();
    auto& pool = p.pool;
    auto a = call(*pool, "again", /*retries=*/1);
    REQUIRE(a->wait_for(10s));
    CHECK(error_of(a->outcomes[0]).empty());
    CHECK(text(a->outcomes[0].result) == "again");
    CHECK(a->outcomes[0].instance_id == "fake-0-1");
    auto r = p.events.replaced(0);
    REQUIRE(r);
    CHECK(r->old_instance_id == "fake-0-0");
    CHECK(r->new_instance_id == "fake-0-1");
    CHECK(fake->connects(0) == 2);
    CHECK(pool->instance_count() == 1);
    pool->close(true);
}

TEST_CASE("pool core: a replacement that fails every attempt leaves the node lost", "[pool_core]") {
    FakePool p;
    auto* fake = p.fake;
    fake->rules(0, {.can_restart = true});
    // One machine only: every replacement's connect fails (no machine left).
    fake->on_connect(0, read_one_then_drop(std::make_shared<FirstCall>()));
    p.start();
    auto& pool = p.pool;
    auto a = call(*pool, "x", /*retries=*/1);
    REQUIRE(a->wait_for(20s));
    CHECK_THAT(error_of(a->outcomes[0]), Catch::Contains("every node of the pool is lost"));
    CHECK(p.events.error_with("replacement failed (attempt 3 of 3)"));
    CHECK(fake->connects(0) == 4);  // the first start and three replacement attempts
    CHECK(pool->instance_count() == 0);
    pool->close(false);
}

TEST_CASE("pool core: a dropped connection is resumed and the kept answer delivered",
          "[pool_core]") {
    FakePool p;
    auto* fake = p.fake;
    fake->rules(0, {.can_reconnect = true});
    auto kept = std::make_shared<FirstCall>();
    auto hello = std::make_shared<std::pair<std::mutex, std::vector<ClientHello>>>();
    fake->on_connect(0, [kept, hello](FakeWorker& w) {
        auto h = w.greet();
        {
            std::lock_guard lk(hello->first);
            hello->second.push_back(h);
        }
        if (auto id = w.next_call()) {
            std::lock_guard lk(kept->m);
            kept->id = *id;
            kept->args.clear();
            kept->args.append(w.args().span().data(), w.args().size());
        }
        w.close();  // the call ran; its answer is kept for the client
    });
    fake->on_reconnect(0, [kept, hello](FakeWorker& w) {
        auto h = w.greet();
        {
            std::lock_guard lk(hello->first);
            hello->second.push_back(h);
        }
        {
            std::lock_guard lk(kept->m);
            w.result(kept->id, kept->args);  // what the worker kept, before the heartbeat
        }
        w.echo();  // answers the heartbeat that ends the resync
    });
    p.start();
    auto& pool = p.pool;
    auto a = call(*pool, "kept");
    REQUIRE(a->wait_for(10s));
    CHECK(error_of(a->outcomes[0]).empty());
    CHECK(text(a->outcomes[0].result) == "kept");
    CHECK(p.events.error_with("reconnecting for up to"));
    CHECK(p.events.error_with(
        "1 kept answer(s) received (0 of them had arrived before the drop); 0 call(s) still "
        "unanswered sent again"));
    CHECK(fake->connects(0) == 1);  // resumed, not replaced
    CHECK(fake->reconnects(0) == 1);
    {
        std::lock_guard lk(hello->first);
        REQUIRE(hello->second.size() == 2);
        CHECK_FALSE(hello->second[0].resume);
        CHECK(hello->second[1].resume);
        CHECK(hello->second[1].session == hello->second[0].session);
    }
    // The node takes calls again.
    auto b = call(*pool, "after");
    REQUIRE(b->wait_for(10s));
    CHECK(text(b->outcomes[0].result) == "after");
    pool->close(true);
}

TEST_CASE("pool core: a resync sends again the calls the resumed worker never answered",
          "[pool_core]") {
    FakePool p;
    auto* fake = p.fake;
    fake->rules(0, {.can_reconnect = true});
    fake->on_connect(0, read_one_then_drop(std::make_shared<FirstCall>()));
    // The resumed worker kept nothing: the call comes again after the heartbeat.
    fake->on_reconnect(0, echo_worker());
    p.start();
    auto& pool = p.pool;
    auto a = call(*pool, "resent");
    REQUIRE(a->wait_for(10s));
    CHECK(text(a->outcomes[0].result) == "resent");
    CHECK(
        p.events.error_with("0 kept answer(s) received (0 of them had arrived before the drop); "
                            "1 call(s) still unanswered sent again"));
    pool->close(true);
}

TEST_CASE("pool core: a reconnect that finds no worker loses the node", "[pool_core]") {
    FakePool p;
    auto* fake = p.fake;
    fake->rules(0, {.can_restart = false,
                    .can_reconnect = true,
                    .exit = {sky::NodeLostError::Reason::worker_crashed, "the worker crashed",
                             std::nullopt}});
    fake->on_connect(0, read_one_then_drop(std::make_shared<FirstCall>()));
    // No reconnect script: the machine answers, no worker listens (WorkerGone).
    p.start();
    auto& pool = p.pool;
    auto a = call(*pool, "gone");
    REQUIRE(a->wait_for(10s));
    CHECK_THAT(error_of(a->outcomes[0]), Catch::Contains("the worker crashed"));
    CHECK(fake->reconnects(0) == 1);
    CHECK(p.events.error_with("node 0 lost: the worker crashed"));
    pool->close(false);
}

// ---- elastic pools (api.md §4a): wake, grow, drain, shrink ------------------------------------

namespace {

/// Calls held by fake workers until the test lets them go.
struct Gate {
    std::mutex m;
    std::condition_variable cv;
    int held = 0;  ///< calls a worker has read and holds
    bool open = false;

    void let_go() {
        std::lock_guard lk(m);
        open = true;
        cv.notify_all();
    }
    /// Waits up to 10 s until `n` calls are held.
    bool holding(int n) {
        std::unique_lock lk(m);
        return cv.wait_for(lk, 10s, [&] { return held >= n; });
    }
};

/// A worker that holds each call until the gate opens, then answers it with its arguments.
sky::test::WorkerScript gated_worker(std::shared_ptr<Gate> gate) {
    return [gate](FakeWorker& w) {
        w.greet();
        while (auto id = w.next_call()) {
            {
                std::unique_lock lk(gate->m);
                ++gate->held;
                gate->cv.notify_all();
                gate->cv.wait(lk, [&] { return gate->open; });
            }
            w.result(*id, w.args());
        }
    };
}

/// Counts events of type E seen so far.
template <class E>
std::vector<E> seen(Events& ev) {
    std::lock_guard lk(ev.m);
    std::vector<E> out;
    for (auto& e : ev.seen)
        if (auto* x = std::get_if<E>(&e)) out.push_back(*x);
    return out;
}

/// Waits up to `limit` for `ok`.
bool eventually(const std::function<bool()>& ok, std::chrono::milliseconds limit = 10s) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
        if (ok()) return true;
        std::this_thread::sleep_for(10ms);
    }
    return ok();
}

void elastic(sky::PoolSpec& s, int min, int max, std::chrono::seconds window) {
    s.autoscale = {.min = min, .max = max, .scaledown_window = window};
}

}  // namespace

TEST_CASE("pool core: a lazy pool starts no node, wakes node 0 on a call and sleeps again",
          "[pool_core][elastic]") {
    FakePool p;
    auto* fake = p.fake;
    fake->on_connect(0, echo_worker());
    fake->on_connect(0, echo_worker());
    p.tune = [](sky::PoolSpec& s) { elastic(s, 0, 2, 1s); };
    p.start(0);
    auto& pool = p.pool;
    CHECK(pool->active());
    CHECK(pool->instance_count() == 0);
    CHECK(fake->connects(0) == 0);  // nothing started before the first call
    auto a = call(*pool, "wake");
    REQUIRE(a->wait_for(10s));
    CHECK(text(a->outcomes[0].result) == "wake");
    CHECK(fake->added() == std::vector<int>{0});
    auto scaled = seen<sky::PoolScaled>(p.events);
    REQUIRE(!scaled.empty());
    CHECK(scaled[0].from == 0);
    CHECK(scaled[0].to == 1);
    CHECK_THAT(scaled[0].reason, Catch::Contains("1 waiting"));
    // Idle for the window: the node is ended and the pool holds none.
    REQUIRE(eventually([&] { return fake->released() == std::vector<int>{0}; }));
    REQUIRE(eventually([&] { return pool->instance_count() == 0; }));
    CHECK(pool->active());
    // The next call wakes it again, as node 0.
    auto b = call(*pool, "again");
    REQUIRE(b->wait_for(10s));
    CHECK(text(b->outcomes[0].result) == "again");
    CHECK(fake->added() == std::vector<int>{0, 0});
    CHECK(b->outcomes[0].node == 0);
    pool->close(true);
}

TEST_CASE("pool core: a burst starts the whole shortfall in one decision and never passes max",
          "[pool_core][elastic]") {
    FakePool p;
    auto* fake = p.fake;
    auto gate = std::make_shared<Gate>();
    for (int i = 0; i < 4; ++i) fake->on_connect(i, gated_worker(gate));
    p.tune = [](sky::PoolSpec& s) { elastic(s, 0, 3, 60s); };
    p.start(0);
    auto& pool = p.pool;
    // One batch of ten calls (as a gather or a map submits them).
    std::vector<CallDesc> descs(10);
    std::vector<const CallDesc*> ptrs;
    for (int i = 0; i < 10; ++i) {
        descs[static_cast<std::size_t>(i)].function = "echo";
        auto args = make_shared_buffer();
        *args = bytes("c" + std::to_string(i));
        descs[static_cast<std::size_t>(i)].args = args;
        ptrs.push_back(&descs[static_cast<std::size_t>(i)]);
    }
    auto batch = pool->submit(ptrs, false);
    // The first node ready takes a pipeful; the decision still asked for three at once.
    REQUIRE(gate->holding(1));
    REQUIRE(eventually([&] { return pool->instance_count() == 3; }));
    auto scaled = seen<sky::PoolScaled>(p.events);
    REQUIRE(scaled.size() >= 1);
    CHECK(scaled[0].from == 0);
    CHECK(scaled[0].to == 3);  // one decision, not one node at a time
    for (auto& e : scaled) CHECK(e.to <= 3);
    gate->let_go();
    REQUIRE(batch->wait_for(10s));
    for (std::size_t i = 0; i < 10; ++i)
        CHECK(text(batch->outcomes[i].result) == "c" + std::to_string(i));
    CHECK(fake->connects(3) == 0);  // never a fourth node
    for (auto& e : seen<sky::PoolScaled>(p.events)) CHECK(e.to <= 3);
    pool->close(true);
}

TEST_CASE("pool core: drain takes no new call, lets the running one finish, then ends the node",
          "[pool_core][elastic]") {
    FakePool p;
    auto* fake = p.fake;
    auto gate = std::make_shared<Gate>();
    fake->on_connect(0, echo_worker());
    fake->on_connect(1, gated_worker(gate));
    p.start(2);
    auto& pool = p.pool;
    // Node 0 echoes at once, node 1 holds what it gets: two calls, one lands on node 1.
    std::vector<std::shared_ptr<BatchState>> first;
    for (int i = 0; i < 2; ++i) first.push_back(call(*pool, "first" + std::to_string(i)));
    REQUIRE(gate->holding(1));
    auto drained = pool->drain(1);
    REQUIRE(eventually([&] { return !seen<sky::NodeDraining>(p.events).empty(); }));
    CHECK(seen<sky::NodeDraining>(p.events)[0].node == 1);
    // Draining: the held call is not killed, the node is not released, new calls go to node 0.
    std::this_thread::sleep_for(200ms);
    CHECK_FALSE(drained->ready());
    CHECK(fake->released().empty());
    auto later = call(*pool, "later");
    REQUIRE(later->wait_for(10s));
    CHECK(later->outcomes[0].node == 0);
    gate->let_go();
    for (auto& c : first) {
        REQUIRE(c->wait_for(10s));
        CHECK(error_of(c->outcomes[0]).empty());
    }
    REQUIRE(drained->wait_for(10s));
    CHECK(drained->outcomes[0].error == nullptr);
    CHECK(fake->released() == std::vector<int>{1});
    CHECK(pool->instance_count() == 1);
    // A fixed pool's size dropped by one; a drain of a node it does not have is refused.
    CHECK_THROWS_AS(pool->drain(5), sky::ConfigError);
    pool->close(true);
}

TEST_CASE("pool core: resize grows a fixed pool at the lowest free index and shrinks it again",
          "[pool_core][elastic]") {
    FakePool p;
    auto* fake = p.fake;
    fake->on_connect(0, echo_worker());
    fake->on_connect(1, echo_worker());
    fake->on_connect(2, echo_worker());
    p.start(1);
    auto& pool = p.pool;
    auto grow = pool->resize(3);
    REQUIRE(grow->wait_for(10s));
    CHECK(grow->outcomes[0].error == nullptr);
    CHECK(pool->instance_count() == 3);
    // The lowest free indexes; the joins run side by side, in no set order.
    auto added = fake->added();
    std::sort(added.begin(), added.end());
    CHECK(added == std::vector<int>{1, 2});
    auto shrink = pool->resize(1);
    REQUIRE(shrink->wait_for(10s));
    CHECK(shrink->outcomes[0].error == nullptr);
    CHECK(pool->instance_count() == 1);
    // Newest first; node 0, the head, stays.
    auto released = fake->released();
    std::sort(released.begin(), released.end());
    CHECK(released == std::vector<int>{1, 2});
    auto c = call(*pool, "still");
    REQUIRE(c->wait_for(10s));
    CHECK(c->outcomes[0].node == 0);
    CHECK_THROWS_AS(pool->resize(-1), sky::ConfigError);
    pool->close(true);
}

TEST_CASE("pool core: a failed scale-up is an ErrorEvent, and with no node the call fails with it",
          "[pool_core][elastic]") {
    FakePool p;
    auto* fake = p.fake;  // no script for node 0: every connect is refused
    p.tune = [](sky::PoolSpec& s) { elastic(s, 0, 1, 60s); };
    p.start(0);
    auto& pool = p.pool;
    auto a = call(*pool, "nowhere");
    REQUIRE(a->wait_for(30s));
    CHECK_THAT(error_of(a->outcomes[0]), Catch::Contains("has no machine left"));
    CHECK(p.events.error_with("scale-up failed (attempt 1 of 3)"));
    CHECK(p.events.error_with("scale-up failed (attempt 3 of 3)"));
    CHECK(fake->connects(0) == 3);
    pool->close(true);
}

namespace {

/// What a fake worker was told of a notice.
struct Told {
    std::mutex m;
    std::condition_variable cv;
    std::map<int, sky::Preemption> by_node;

    void tell(int node, const sky::Preemption& p) {
        std::lock_guard lk(m);
        by_node[node] = p;
        cv.notify_all();
    }
    bool all(std::size_t n) {
        std::unique_lock lk(m);
        return cv.wait_for(lk, 10s, [&] { return by_node.size() == n; });
    }
};

std::vector<sky::PreemptionNotice> notices(Events& e) {
    std::lock_guard lk(e.m);
    std::vector<sky::PreemptionNotice> out;
    for (auto& x : e.seen)
        if (auto* n = std::get_if<sky::PreemptionNotice>(&x)) out.push_back(*n);
    return out;
}

}  // namespace

TEST_CASE(
    "pool core: a node's own notice frame is one PreemptionNotice, every node gets the agreed "
    "step",
    "[pool_core][preemption]") {
    FakePool p;
    auto told = std::make_shared<Told>();
    const auto deadline =
        std::chrono::system_clock::time_point(std::chrono::milliseconds(1'900'000'000'000));
    NodeNotice n;
    n.deadline = deadline;
    n.reason = "spot instance-action: terminate at 2030-03-17T17:46:40Z";
    // Node 0 reports step 41 and waits to be told; node 1's launcher learned of a reclaim.
    p.fake->on_connect(0, [told](FakeWorker& w) {
        w.greet();
        w.progress(41);
        if (auto got = w.await_preempt(); got && *got) told->tell(0, **got);
    });
    p.fake->on_connect(1, [told, n](FakeWorker& w) {
        w.greet();
        std::this_thread::sleep_for(300ms);  // node 0's step is in first
        w.notice(n);
        if (auto got = w.await_preempt(); got && *got) told->tell(1, **got);
        // The worker sends it again while it stands: the pool reports it once.
        w.notice(n);
    });
    p.start(2);
    REQUIRE(told->all(2));
    for (int node : {0, 1}) {
        INFO("node " << node);
        const auto& got = told->by_node.at(node);
        CHECK(got.node == 1);
        CHECK(got.instance_id == "fake-1-0");
        CHECK(got.deadline == deadline);
        CHECK(got.reason == n.reason);
        CHECK(got.checkpoint_step == 42);
    }
    std::this_thread::sleep_for(300ms);
    const auto seen = notices(p.events);
    REQUIRE(seen.size() == 1);
    CHECK(seen[0].node == 1);
    CHECK(seen[0].instance_id == "fake-1-0");
    CHECK(seen[0].deadline == deadline);
    CHECK(seen[0].checkpoint_step == 42);
    CHECK(seen[0].reason == n.reason);
    p.pool->close(true);
}

TEST_CASE("pool core: a notice the backend hands to the pool reaches every node, once",
          "[pool_core][preemption]") {
    FakePool p;
    auto told = std::make_shared<Told>();
    for (int node : {0, 1})
        p.fake->on_connect(node, [told](FakeWorker& w) {
            w.greet();
            if (auto got = w.await_preempt(); got && *got) told->tell(w.node(), **got);
        });
    p.start(2);
    const auto deadline = std::chrono::system_clock::now() + 60s;
    // A client-side source (a pod watch): no progress reported, so save at once (-1).
    p.fake->client_notice(0, "fake-0-0", deadline, "the pod's DisruptionTarget condition");
    p.fake->client_notice(0, "fake-0-0", deadline, "the pod's DisruptionTarget condition");
    REQUIRE(told->all(2));
    for (int node : {0, 1}) {
        const auto& got = told->by_node.at(node);
        CHECK(got.node == 0);
        CHECK(got.checkpoint_step == -1);
        CHECK(got.reason == "the pod's DisruptionTarget condition");
    }
    std::this_thread::sleep_for(200ms);
    const auto seen = notices(p.events);
    REQUIRE(seen.size() == 1);
    CHECK(seen[0].instance_id == "fake-0-0");
    CHECK(seen[0].checkpoint_step == -1);
    p.pool->close(true);
}
