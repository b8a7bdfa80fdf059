// The pool's scheduling rules (pool/scheduler.hpp) without nodes, threads or sockets: which node
// gets which call, what happens to a lost node's calls, deadlines and cancellation.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "pool/scheduler.hpp"
#include "support/source_scan.hpp"

using namespace sky::detail;
using namespace std::chrono_literals;
using State = Scheduler::NodeState;

namespace {

struct Sent {
    int node;
    std::uint64_t call_id;
    std::size_t index;  ///< the batch item
};

/// A scheduler over `nodes` ready nodes and the calls it assigned, in order.
struct Fixture {
    Scheduler s;
    std::vector<Sent> sent;
    Clock::time_point t0 = Clock::now();

    explicit Fixture(int nodes, int concurrency = 1) : s(nodes, concurrency) {
        for (int i = 0; i < nodes; ++i) s.set_state(i, State::ready);
    }
    static CallDesc call(int retries = 0, std::optional<std::chrono::milliseconds> timeout = {}) {
        CallDesc c;
        c.function = "train";
        c.options.retries = retries;
        c.options.timeout = timeout;
        return c;
    }
    /// Queues `n` calls of one batch.
    std::shared_ptr<BatchState> submit(std::size_t n, const CallDesc& c = call()) {
        auto b = std::make_shared<BatchState>(n);
        for (std::size_t i = 0; i < n; ++i) s.enqueue(s.make_task(b, i, c, -1, t0));
        return b;
    }
    /// Dispatches and returns what was assigned this time.
    std::vector<Sent> dispatch() {
        std::vector<Sent> now;
        s.dispatch([&](int node, std::uint64_t id, const Task& t) {
            now.push_back({node, id, t.index});
        });
        sent.insert(sent.end(), now.begin(), now.end());
        return now;
    }
    static std::map<int, int> per_node(const std::vector<Sent>& v) {
        std::map<int, int> m;
        for (auto& x : v) ++m[x.node];
        return m;
    }
};

std::set<std::size_t> indices(const std::vector<Task>& v) {
    std::set<std::size_t> s;
    for (auto& t : v) s.insert(t.index);
    return s;
}

}  // namespace

TEST_CASE("scheduler: a batch spreads evenly over the ready nodes", "[scheduler]") {
    Fixture f(3);
    f.submit(9);
    // A node's pipe is as deep as the calls still waiting per slot, counted as they are handed
    // out: 9 per 3 slots lets each node take a second call, not a third.
    auto sent = f.dispatch();
    REQUIRE(sent.size() == 6);
    CHECK(Fixture::per_node(sent) == std::map<int, int>{{0, 2}, {1, 2}, {2, 2}});
    std::set<std::uint64_t> ids;
    for (auto& x : sent) ids.insert(x.call_id);
    CHECK(ids.size() == 6);  // every call has an id of its own
    CHECK(f.s.waiting() == 3);
    // Now 3 wait for 3 slots, each with a call running: a node takes the next one when its
    // slot is free (its pipe no deeper than one per slot), not behind a call that may be slow.
    auto on_2 = std::find_if(sent.begin(), sent.end(), [](auto& x) { return x.node == 2; });
    REQUIRE(f.s.take(2, on_2->call_id));
    CHECK(f.dispatch().empty());
    on_2 = std::find_if(on_2 + 1, sent.end(), [](auto& x) { return x.node == 2; });
    REQUIRE(f.s.take(2, on_2->call_id));
    auto next = f.dispatch();
    REQUIRE(next.size() == 1);
    CHECK(next[0].node == 2);
}

TEST_CASE("scheduler: only ready nodes take calls", "[scheduler]") {
    Fixture f(3);
    f.s.set_state(1, State::starting);
    f.s.set_state(2, State::restarting);
    f.submit(4);
    auto sent = f.dispatch();
    CHECK(Fixture::per_node(sent) == std::map<int, int>{{0, 2}});  // 4 per slot, then 3, then 2
    CHECK(f.s.waiting() == 2);
    Fixture none(2);
    none.s.set_state(0, State::lost);
    none.s.set_state(1, State::starting);
    none.submit(2);
    CHECK(none.dispatch().empty());
    CHECK(none.s.waiting() == 2);
}

TEST_CASE("scheduler: a node's pipe is shallow while little waits", "[scheduler]") {
    Fixture f(1);
    f.submit(1);
    REQUIRE(f.dispatch().size() == 1);
    f.submit(1);
    // One slot, one call running, one waiting: it waits for the slot rather than queue behind
    // a call that may be slow.
    CHECK(f.dispatch().empty());
    REQUIRE(f.s.take(0, f.sent[0].call_id));
    CHECK(f.dispatch().size() == 1);
}

TEST_CASE("scheduler: concurrency and worker processes multiply a node's slots", "[scheduler]") {
    Fixture f(2, 2);
    f.s.set_workers(0, 3);  // 6 slots on node 0, 2 on node 1
    f.submit(8);
    auto sent = f.dispatch();
    REQUIRE(sent.size() == 8);
    CHECK(Fixture::per_node(sent) == std::map<int, int>{{0, 6}, {1, 2}});
    CHECK(f.s.inflight(0) == 6);
    CHECK(f.s.inflight(1) == 2);
    f.s.set_workers(1, 0);  // a worker that claims none still has one process
    CHECK(f.s.workers(1) == 1);
}

TEST_CASE("scheduler: pinned calls run on their node, before waiting ones", "[scheduler]") {
    Fixture f(2);
    f.submit(2);
    auto b = std::make_shared<BatchState>(1);
    f.s.pin(f.s.make_task(b, 0, Fixture::call(), 1, f.t0));
    auto sent = f.dispatch();
    // One slot each: node 0 takes a waiting call, node 1 its pinned one, and the other waiting
    // call waits.
    REQUIRE(sent.size() == 2);
    CHECK(Fixture::per_node(sent) == std::map<int, int>{{0, 1}, {1, 1}});
    auto on_1 = std::find_if(sent.begin(), sent.end(), [](auto& x) { return x.node == 1; });
    auto t = f.s.take(1, on_1->call_id);
    REQUIRE(t);
    CHECK(t->batch == b);
    CHECK(t->pinned == 1);
    CHECK(f.s.waiting() == 1);
}

TEST_CASE("scheduler: a lost node's calls with retries run again elsewhere, the rest fail",
          "[scheduler]") {
    Fixture f(2, 2);
    auto b = f.submit(4, Fixture::call(1));
    auto pinned_b = std::make_shared<BatchState>(1);
    f.s.pin(f.s.make_task(pinned_b, 0, Fixture::call(0), 0, f.t0));
    f.dispatch();
    // Two slots each: node 0 runs its pinned call and one of b's, node 1 two; one waits.
    REQUIRE(f.s.inflight(0) == 2);
    REQUIRE(f.s.inflight(1) == 2);
    REQUIRE(f.s.waiting() == 1);
    REQUIRE(f.sent[0].node == 0);  // the pinned call went first
    std::size_t x = 99;            // b's item on node 0
    for (auto& s : f.sent)
        if (s.node == 0 && s.call_id != f.sent[0].call_id) x = s.index;
    REQUIRE(x < 4);
    auto failed = f.s.node_lost(0, State::restarting);
    // Item x had a retry and waits again, at the head of the queue; the pinned call (a
    // broadcast's share) without retries fails.
    REQUIRE(failed.size() == 1);
    CHECK(failed[0].batch == pinned_b);
    CHECK(f.s.state(0) == State::restarting);
    CHECK(f.s.waiting() == 2);
    CHECK(f.s.any_live());
    // Node 0 is back (its replacement), but item x goes to node 1 while that lives; the call
    // that never ran anywhere may run on node 0.
    f.s.set_state(0, State::ready);
    for (auto& s : std::vector<Sent>(f.sent))
        if (s.node == 1) REQUIRE(f.s.take(1, s.call_id));
    auto again = f.dispatch();
    REQUIRE(again.size() == 2);
    for (auto& s : again) CHECK(s.node == (s.index == x ? 1 : 0));
    // Lost again with its one retry used: now it fails.
    auto failed2 = f.s.node_lost(1, State::lost);
    REQUIRE(failed2.size() == 1);
    CHECK(failed2[0].index == x);
    CHECK(failed2[0].batch == b);
    CHECK(failed2[0].retries_left == 0);
    CHECK(failed2[0].lost_on == 0);
}

TEST_CASE("scheduler: a broadcast's share with retries runs again on its node's replacement",
          "[scheduler]") {
    Fixture f(2);
    auto b = std::make_shared<BatchState>(1);
    f.s.pin(f.s.make_task(b, 0, Fixture::call(1), 1, f.t0));
    auto sent = f.dispatch();
    REQUIRE(sent.size() == 1);
    CHECK(sent[0].node == 1);
    // Node 1 is being replaced: the share waits for it (not for node 0, which is free).
    CHECK(f.s.node_lost(1, State::restarting).empty());
    CHECK(f.dispatch().empty());
    f.s.set_state(1, State::ready);
    sent = f.dispatch();
    REQUIRE(sent.size() == 1);
    CHECK(sent[0].node == 1);
    CHECK(sent[0].index == 0);
    // Lost again with its retry spent: it fails.
    auto failed = f.s.node_lost(1, State::restarting);
    REQUIRE(failed.size() == 1);
    CHECK(failed[0].retries_left == 0);

    // A node lost for good fails its share whatever its retries; so does a replaced node a
    // distributed call's rank (alone, it would wait for peers that have ended).
    Fixture g(2);
    auto c = std::make_shared<BatchState>(2);
    g.s.pin(g.s.make_task(c, 0, Fixture::call(3), 0, g.t0));
    CallDesc rank = Fixture::call(3);
    rank.options.plugin.kind = PluginSpec::torch;
    g.s.pin(g.s.make_task(c, 1, rank, 1, g.t0));
    REQUIRE(g.dispatch().size() == 2);
    CHECK(g.s.node_lost(0, State::lost).size() == 1);
    CHECK(g.s.node_lost(1, State::restarting).size() == 1);
}

TEST_CASE("scheduler: an at-most-once call that started is not retried, one that did not is",
          "[scheduler]") {
    Fixture f(2, 2);
    CallDesc c = Fixture::call(1);
    c.options.at_most_once = true;
    f.submit(2, c);  // both on node 0 (with node 1 lost first)
    f.s.set_state(1, State::lost);
    f.dispatch();
    f.s.set_state(1, State::ready);
    REQUIRE(f.sent.size() == 2);
    REQUIRE(f.s.inflight(0) == 2);
    // The worker said the first started; the second waits in its worker's queue.
    Task* t = f.s.mark_started(0, f.sent[0].call_id);
    REQUIRE(t);
    CHECK(t->started);
    CHECK(t->call_id == f.sent[0].call_id);
    CHECK_FALSE(f.s.mark_started(0, 12345));  // not in flight: nothing to mark
    auto failed = f.s.node_lost(0, State::restarting);
    REQUIRE(failed.size() == 1);
    CHECK(failed[0].index == f.sent[0].index);
    CHECK(failed[0].started);
    CHECK(failed[0].retries_left == 1);  // it had retries, and still may not run again
    // The one that never started runs again, on node 1, as a new attempt (a new call id).
    auto again = f.dispatch();
    REQUIRE(again.size() == 1);
    CHECK(again[0].index == f.sent[1].index);
    CHECK(again[0].node == 1);
    CHECK(again[0].call_id != f.sent[1].call_id);
}

TEST_CASE("scheduler: plain retries run a started call again (at least once)", "[scheduler]") {
    Fixture f(2);
    f.submit(1, Fixture::call(1));
    auto sent = f.dispatch();
    REQUIRE(sent.size() == 1);
    REQUIRE(f.s.mark_started(sent[0].node, sent[0].call_id));
    CHECK(f.s.node_lost(sent[0].node, State::lost).empty());
    auto again = f.dispatch();
    REQUIRE(again.size() == 1);
    CHECK(again[0].node != sent[0].node);
    // The new attempt has not started yet.
    CHECK_FALSE(f.s.take(again[0].node, again[0].call_id)->started);
}

TEST_CASE("scheduler: retries wait in the order their calls were sent", "[scheduler]") {
    Fixture f(2, 4);
    f.submit(8, Fixture::call(1));
    f.dispatch();
    std::vector<std::size_t> sent_to_0;
    for (auto& x : f.sent)
        if (x.node == 0) sent_to_0.push_back(x.index);
    REQUIRE(sent_to_0.size() == 4);
    CHECK(f.s.node_lost(0, State::lost).empty());
    CHECK(f.dispatch().empty());  // node 1 is full: they wait, in the order they were sent

    auto waiting = f.s.drain_waiting();
    std::vector<std::size_t> order;
    for (auto& t : waiting) order.push_back(t.index);
    CHECK(order == sent_to_0);
}

TEST_CASE("scheduler: on a one-node pool a retry goes to the node's replacement", "[scheduler]") {
    Fixture f(1);
    f.submit(1, Fixture::call(1));
    f.dispatch();
    CHECK(f.s.node_lost(0, State::restarting).empty());
    CHECK(f.dispatch().empty());  // nothing takes it while the node is replaced
    f.s.set_state(0, State::ready);
    CHECK(f.dispatch().size() == 1);
}

TEST_CASE("scheduler: with no live node left nothing waits", "[scheduler]") {
    Fixture f(2);
    f.s.set_state(1, State::lost);
    f.submit(3, Fixture::call(2));
    f.dispatch();
    auto failed = f.s.node_lost(0, State::lost);
    CHECK(failed.empty());  // retries: back in the queue...
    CHECK_FALSE(f.s.any_live());
    CHECK(indices(f.s.drain_waiting()) == std::set<std::size_t>{0, 1, 2});  // ...to be failed
    CHECK(f.s.waiting() == 0);
}

TEST_CASE("scheduler: deadlines end waiting, pinned and running calls", "[scheduler]") {
    Fixture f(1);
    auto c = Fixture::call(0, 100ms);
    auto b = f.submit(3, c);  // two run (3 per slot, then 2), one waits
    f.dispatch();
    REQUIRE(f.s.inflight(0) == 2);
    f.s.pin(f.s.make_task(b, 0, c, 0, f.t0 + 50ms));
    REQUIRE(f.s.next_deadline());
    CHECK(*f.s.next_deadline() == f.t0 + 100ms);
    CHECK(f.s.expire(f.t0 + 99ms).tasks.empty());
    auto gone = f.s.expire(f.t0 + 100ms);
    CHECK(gone.tasks.size() == 3);
    // Only the running ones are named for a cancel frame to their worker.
    REQUIRE(gone.cancels.size() == 2);
    CHECK(gone.cancels[0] == std::pair<int, std::uint64_t>{0, f.sent[0].call_id});
    CHECK(gone.cancels[1] == std::pair<int, std::uint64_t>{0, f.sent[1].call_id});
    CHECK(f.s.inflight(0) == 0);
    CHECK(f.s.waiting() == 0);
    REQUIRE(f.s.next_deadline());  // the pinned one, later
    CHECK(f.s.expire(f.t0 + 150ms).tasks.size() == 1);
    CHECK_FALSE(f.s.next_deadline());
    CHECK_FALSE(f.s.take(0, f.sent[0].call_id));  // its result, if it comes, is dropped
}

TEST_CASE("scheduler: a finished call's deadline is forgotten, a late result is late",
          "[scheduler]") {
    Fixture f(1);
    f.submit(1, Fixture::call(0, 1s));
    f.dispatch();
    auto t = f.s.take(0, f.sent[0].call_id);
    REQUIRE(t);
    CHECK_FALSE(f.s.next_deadline());
    CHECK_FALSE(t->late(f.t0 + 1s));
    CHECK(t->late(f.t0 + 1001ms));
    Task untimed;
    CHECK_FALSE(untimed.late(Clock::time_point::max()));
}

TEST_CASE("scheduler: a retried call keeps its deadline", "[scheduler]") {
    Fixture f(2);
    f.submit(1, Fixture::call(1, 1s));
    f.dispatch();
    const int node = f.sent[0].node;
    CHECK(f.s.node_lost(node, State::lost).empty());
    CHECK(f.s.expire(f.t0 + 1s).tasks.size() == 1);  // expired while waiting for its retry
}

TEST_CASE("scheduler: cancelling a batch takes its calls from everywhere", "[scheduler]") {
    Fixture f(2);
    auto a = f.submit(6, Fixture::call(0, 5s));
    f.dispatch();  // four in flight, two waiting
    REQUIRE(f.s.inflight(0) + f.s.inflight(1) == 4);
    auto b = f.submit(2);
    f.s.pin(f.s.make_task(a, 0, Fixture::call(), 1, f.t0));
    auto r = f.s.cancel(a.get());
    CHECK(r.tasks.size() == 7);
    CHECK(r.cancels.size() == 4);
    for (auto& t : r.tasks) CHECK(t.batch == a);
    CHECK(f.s.waiting() == 2);  // b's calls stay
    CHECK(f.s.inflight(0) + f.s.inflight(1) == 0);
    CHECK_FALSE(f.s.next_deadline());  // a's deadlines went with it
    CHECK(f.s.cancel(a.get()).tasks.empty());
}

TEST_CASE("scheduler: closing takes every call", "[scheduler]") {
    Fixture f(2);
    f.submit(4, Fixture::call(0, 1s));
    f.dispatch();
    f.submit(2);
    f.s.pin(f.s.make_task(std::make_shared<BatchState>(1), 0, Fixture::call(), 0, f.t0));
    CHECK(f.s.drain_all().size() == 7);
    CHECK(f.s.waiting() == 0);
    CHECK(f.s.inflight(0) + f.s.inflight(1) == 0);
    CHECK_FALSE(f.s.next_deadline());
    CHECK(f.dispatch().empty());
}

TEST_CASE("scheduler: retries lost on a node wait for the others within a bounded look-ahead",
          "[scheduler]") {
    Fixture f(2, 100);
    f.submit(140, Fixture::call(1));
    f.dispatch();
    REQUIRE(f.s.inflight(0) == 70);
    CHECK(f.s.node_lost(0, State::restarting).empty());
    f.s.set_state(0, State::ready);
    f.s.set_state(1, State::restarting);  // live, but taking no calls
    f.submit(1);                          // a fresh call behind 70 retries
    // Node 0 looks 64 calls ahead: all it sees are its own lost calls (which belong on node 1
    // while that lives), so the fresh call waits too.
    CHECK(f.dispatch().empty());
    f.s.set_state(1, State::lost);  // no other node lives: node 0 takes its retries itself
    CHECK(f.dispatch().size() == 71);
}

TEST_CASE("scheduler: a broadcast pins one call to each node, in node order", "[scheduler]") {
    Fixture f(3);
    f.submit(5);  // waiting calls: a broadcast's pinned calls go first
    REQUIRE(f.s.broadcast_size(false) == 3);
    auto b = std::make_shared<BatchState>(3);
    CHECK(f.s.broadcast(b, Fixture::call(), false, f.t0).empty());
    // Pinned calls go before waiting ones: each node's first call is its broadcast item.
    std::map<int, std::size_t> first;
    f.s.dispatch([&](int node, std::uint64_t, const Task& t) {
        if (!first.count(node)) first[node] = t.batch == b ? t.index : 99;
    });
    CHECK(first == std::map<int, std::size_t>{{0, 0}, {1, 1}, {2, 2}});
}

TEST_CASE("scheduler: a per-rank broadcast runs once per worker process, ranks in node order",
          "[scheduler]") {
    Fixture f(2);
    f.s.set_workers(0, 2);
    f.s.set_workers(1, 3);
    REQUIRE(f.s.broadcast_size(true) == 5);
    REQUIRE(f.s.broadcast_size(false) == 2);
    auto b = std::make_shared<BatchState>(5);
    std::vector<std::pair<int, int>> where;  // per item: (node, worker process)
    CHECK(f.s.broadcast(b, Fixture::call(), true, f.t0).empty());
    where.resize(5);
    f.s.dispatch([&](int node, std::uint64_t, const Task& t) {
        where.at(t.index) = {node, t.pinned_worker};
    });
    CHECK(where == std::vector<std::pair<int, int>>{{0, 0}, {0, 1}, {1, 0}, {1, 1}, {1, 2}});
}

TEST_CASE("scheduler: a broadcast's share of a lost node fails, a replaced node's waits",
          "[scheduler]") {
    Fixture f(3);
    f.s.set_state(1, State::lost);
    f.s.set_state(2, State::restarting);
    auto b = std::make_shared<BatchState>(3);
    auto unplaced = f.s.broadcast(b, Fixture::call(), false, f.t0);
    CHECK(unplaced == std::vector<std::pair<std::size_t, int>>{{1, 1}});
    auto sent = f.dispatch();
    REQUIRE(sent.size() == 1);  // node 0 now; node 2's call waits for its replacement
    CHECK(sent[0].node == 0);
    f.s.set_state(2, State::ready);
    sent = f.dispatch();
    REQUIRE(sent.size() == 1);
    CHECK(sent[0].node == 2);
    CHECK(sent[0].index == 2);
}

TEST_CASE("scheduler: uses no threads or locks", "[scheduler]") {
    // The supervisor's lock guards it; a thread or lock of its own would make its rules
    // untestable here. Its sources say so.
    for (const char* file : {"src/pool/scheduler.hpp", "src/pool/scheduler.cpp"}) {
        INFO(file);
        CHECK(sky::test::mentions(std::string(SKY_SOURCE_DIR) + "/" + file,
                                  {"<thread>", "<mutex>", "<condition_variable>", "<future>",
                                   "std::thread", "std::mutex", "sleep_for"}) ==
              std::vector<std::string>{});
    }
}

TEST_CASE(
    "scheduler: a node taken out of dispatch (reconnecting) keeps its calls in flight, listed in "
    "the order they were sent, and takes calls again once ready",
    "[scheduler]") {
    Fixture f(1, 2);
    f.submit(5);
    const auto first = f.dispatch();
    REQUIRE(!first.empty());
    const std::size_t inflight = f.s.inflight(0);
    // Reconnecting: the pool sets the node restarting; nothing is lost, nothing dispatched.
    f.s.set_state(0, State::restarting);
    CHECK(f.s.any_live());
    f.submit(1);
    CHECK(f.dispatch().empty());
    CHECK(f.s.inflight(0) == inflight);
    // One answer arrived before the drop: the rest is what goes again, in call id order.
    REQUIRE(f.s.take(0, first[1].call_id));
    const auto again = f.s.inflight_tasks(0);
    REQUIRE(again.size() == inflight - 1);
    for (std::size_t i = 1; i < again.size(); ++i) CHECK(again[i - 1]->call_id < again[i]->call_id);
    for (const Task* t : again) CHECK(t->call_id != first[1].call_id);
    f.s.set_state(0, State::ready);
    CHECK(!f.dispatch().empty());
}

TEST_CASE("scheduler: a node joins at the lowest free index and takes calls once ready",
          "[scheduler]") {
    Fixture f(2);
    CHECK(f.s.node_ids() == std::vector<int>{0, 1});
    const int joined = f.s.add_node();
    CHECK(joined == 2);
    CHECK(f.s.nodes() == 3);
    CHECK(f.s.state(joined) == State::starting);
    f.submit(3);
    CHECK(Fixture::per_node(f.dispatch()) == std::map<int, int>{{0, 1}, {1, 1}});
    f.s.set_state(joined, State::ready);
    CHECK(Fixture::per_node(f.dispatch()) == std::map<int, int>{{2, 1}});
}

TEST_CASE("scheduler: a retired node's calls go back to the queue and its index is reused",
          "[scheduler]") {
    Fixture f(3);
    f.submit(3, Fixture::call(/*retries=*/1));
    auto sent = f.dispatch();
    REQUIRE(Fixture::per_node(sent) == std::map<int, int>{{0, 1}, {1, 1}, {2, 1}});
    // Node 1 leaves while its call runs: the call waits for another node (it has a retry).
    CHECK(f.s.retire_node(1).empty());
    CHECK_FALSE(f.s.has_node(1));
    CHECK(f.s.node_ids() == std::vector<int>{0, 2});
    CHECK(f.s.nodes() == 2);
    CHECK(f.s.waiting() == 1);
    CHECK(f.s.broadcast_size(false) == 2);  // a broadcast reaches the nodes there are
    // A gap: dispatch goes round the nodes there are, and a new node fills the gap first.
    for (auto& x : sent)
        if (x.node != 1) REQUIRE(f.s.take(x.node, x.call_id));
    auto again = f.dispatch();
    REQUIRE(again.size() == 1);
    CHECK(again[0].node != 1);
    CHECK(f.s.add_node() == 1);
    CHECK(f.s.add_node() == 3);
    CHECK(f.s.retire_node(7).empty());  // no such node: nothing happens
    // A call without retries on a retired node fails; pinned calls to it too.
    Fixture g(2);
    g.submit(2);
    auto on = g.dispatch();
    REQUIRE(on.size() == 2);
    auto failed = g.s.retire_node(0);
    REQUIRE(failed.size() == 1);
    CHECK(g.s.any_live());
}
