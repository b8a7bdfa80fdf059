#pragma once
// Which slot runs which call: the pool's queue of waiting calls, each node's calls in flight and
// pinned to it, retries after a lost node, deadlines and cancellation. No threads, locks or I/O:
// the supervisor (PoolCore) calls it under its lock, encodes and sends the calls it assigns, and
// completes the calls it hands back, so every scheduling rule is unit-tested on its own
// (tests/unit/pool/test_scheduler.cpp).
#include <chrono>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sky/detail/call.hpp"

namespace sky::detail {

using Clock = std::chrono::steady_clock;

/// One call on its way: which batch item it completes, where it may run, what it printed.
struct Task {
    std::shared_ptr<BatchState> batch;
    std::size_t index = 0;
    CallDesc call;
    int retries_left = 0;
    int pinned = -1;            ///< node it must run on (broadcast), or -1
    int pinned_worker = -1;     ///< worker process (local rank) on that node, for a per-rank call
    int lost_on = -1;           ///< node it was lost with: a retry goes to another while one lives
    std::uint64_t call_id = 0;  ///< the id of its current attempt (its frames'), while in flight
    /// The worker said this attempt started (a "started" frame, or its crash report).
    bool started = false;
    std::uint64_t seq = 0;
    std::optional<Clock::time_point> deadline;
    std::vector<std::string> log_tail;

    /// Its deadline has passed at `now` (a result arriving now is too late).
    [[nodiscard]] bool late(Clock::time_point now) const noexcept {
        return deadline && now > *deadline;
    }
};

/// A call's outcome on its way to the batch it completes.
struct Completion {
    std::shared_ptr<BatchState> batch;
    std::size_t index;
    Buffer result;
    std::exception_ptr error;
    int node = -1;  ///< for a result: where it ran, and what it printed last
    std::string instance_id{};
    std::vector<std::string> log_tail{};

    /// A failed call.
    static Completion failed(const Task& t, std::exception_ptr e) {
        return {t.batch, t.index, {}, std::move(e)};
    }
    /// Completes every batch item; outside any lock (a batch's waiter may run at once).
    static void deliver(std::vector<Completion>& done);
};

/// The error of a call that did not finish within its .timeout().
std::exception_ptr timeout_error(const Task& t);

class Scheduler {
public:
    /// A node as the scheduler sees it: only a ready node takes calls; a restarting one still
    /// counts as live (its calls wait for the replacement).
    /// A draining node takes no new call; its calls in flight finish there.
    enum class NodeState { starting, ready, restarting, lost, closed, draining };

    /// Calls taken away from the nodes and the queue, and the calls in flight among them that
    /// the worker should be told to drop (node, call id).
    struct Removed {
        std::vector<Task> tasks;
        std::vector<std::pair<int, std::uint64_t>> cancels;
    };

    /// Called for each call given to a node, with the call id its frame carries.
    using Assigned = std::function<void(int node, std::uint64_t call_id, const Task&)>;

    /// `nodes` nodes (0 .. nodes-1), all starting; each worker process of a ready node runs
    /// `concurrency` calls at once, and up to `max_pipeline_depth` times that many may wait in
    /// its pipe. Nodes join (add_node) and leave (retire_node) later: a node's index is its
    /// name, not its position, and indexes may have gaps.
    Scheduler(int nodes, int concurrency, std::size_t max_pipeline_depth = 64);

    /// How many nodes there are now.
    [[nodiscard]] int nodes() const noexcept { return static_cast<int>(nodes_.size()); }
    /// Their indexes, lowest first.
    [[nodiscard]] std::vector<int> node_ids() const;
    [[nodiscard]] bool has_node(int node) const { return nodes_.count(node) != 0; }
    /// A new node, starting, at the lowest index no node has; returns it.
    int add_node();
    /// A new node, starting, at index `node` (which no node has: the pool picked it).
    void add_node_at(int node);
    /// Calls waiting for this node only (a broadcast's share).
    [[nodiscard]] std::size_t pinned(int node) const { return at(node).pinned.size(); }
    /// Calls pinned to any node.
    [[nodiscard]] std::size_t pinned_total() const;
    /// Calls in flight on every node.
    [[nodiscard]] std::size_t inflight_total() const;
    /// The node leaves the pool: its calls in flight go back to the queue as after a loss
    /// (node_lost), and the ones that cannot (no retries left, pinned to it) are returned, to
    /// fail. Its index is free again.
    std::vector<Task> retire_node(int node);
    [[nodiscard]] NodeState state(int node) const { return at(node).state; }
    void set_state(int node, NodeState s) { at(node).state = s; }
    /// Worker processes on the node (W, from its ready frame); at least 1.
    [[nodiscard]] int workers(int node) const { return at(node).workers; }
    void set_workers(int node, int workers);
    /// Calls in flight on the node.
    [[nodiscard]] std::size_t inflight(int node) const { return at(node).inflight.size(); }
    /// Calls waiting for any node.
    [[nodiscard]] std::size_t waiting() const noexcept { return pending_.size(); }
    /// True while some node is ready or being replaced: calls can still be served.
    [[nodiscard]] bool any_live() const;
    /// True while a node other than `node` is ready or being replaced.
    [[nodiscard]] bool others_live(int node) const;

    /// A new call for batch item `index` (its deadline, if any, counted from `now`).
    Task make_task(std::shared_ptr<BatchState> batch, std::size_t index, const CallDesc& call,
                   int pinned, Clock::time_point now);
    /// Queues a call for whichever node is free first.
    void enqueue(Task t);
    /// Queues a call for node `t.pinned` only.
    void pin(Task t);

    /// Which nodes a broadcast runs on: every node but those starting or draining (an elastic
    /// pool's newcomers and leavers), or only `world` when it is not empty.
    [[nodiscard]] std::vector<int> broadcast_nodes(const std::vector<int>& world = {}) const;
    /// How many items a broadcast has: one per node, or with `per_rank` (a distributed plugin's
    /// call) one per worker process of each node (of broadcast_nodes(world)).
    [[nodiscard]] std::size_t broadcast_size(bool per_rank,
                                             const std::vector<int>& world = {}) const;
    /// Places a broadcast of `call` whose batch has broadcast_size(per_rank) items, in rank
    /// order (node 0's worker processes first): each item pinned to its node, and with
    /// `per_rank` to its worker process there. A node that is gone for good (lost, closed)
    /// takes nothing: its items are returned as (item, node), to fail.
    std::vector<std::pair<std::size_t, int>> broadcast(const std::shared_ptr<BatchState>& batch,
                                                       const CallDesc& call, bool per_rank,
                                                       Clock::time_point now,
                                                       const std::vector<int>& world = {});

    /// Gives waiting calls to ready nodes with room: pinned calls first, then the queue, one
    /// node at a time in rotation so that every node gets its share.
    void dispatch(const Assigned& assigned);

    /// The call's log tail, while it is in flight on the node (nullptr otherwise).
    std::vector<std::string>* log_tail(int node, std::uint64_t call_id);
    /// A result or error for the call arrived: the call, when it was still in flight there (not
    /// timed out or cancelled already).
    std::optional<Task> take(int node, std::uint64_t call_id);

    /// The node's calls in flight, in the order they were sent (to send again to a worker
    /// that resumed after a dropped connection).
    [[nodiscard]] std::vector<const Task*> inflight_tasks(int node) const;

    /// The worker said the call started: marks it, and returns it while it is in flight there
    /// (nullptr: finished, timed out or cancelled already).
    Task* mark_started(int node, std::uint64_t call_id);

    /// The node's connection ended and it becomes `now_state` (lost, or restarting when a
    /// replacement starts): its calls in flight with retries left go back to the head of the
    /// queue, in order, to run on another node while one lives, except an at_most_once call
    /// that started (it may have run); a plain broadcast's share with retries left stays pinned
    /// to the node when it is restarting, to run on its replacement; the others and its pinned
    /// calls waiting to start are returned, to fail.
    std::vector<Task> node_lost(int node, NodeState now_state);
    /// The node's calls pinned to it (which can never run when it is gone for good).
    std::vector<Task> drain_pinned(int node);
    /// Every waiting call of the queue.
    std::vector<Task> drain_waiting();
    /// Everything: queued, pinned and in flight (the pool is closing).
    std::vector<Task> drain_all();

    /// The first deadline still registered, if any (the supervisor sleeps until then).
    [[nodiscard]] std::optional<Clock::time_point> next_deadline() const;
    /// Calls whose deadline passed at `now`, wherever they are.
    Removed expire(Clock::time_point now);
    /// Every call of batch `b`, wherever it is.
    Removed cancel(const BatchState* b);

private:
    struct Node {
        NodeState state = NodeState::starting;
        int workers = 1;
        std::unordered_map<std::uint64_t, Task> inflight;
        std::deque<Task> pinned;
    };
    Node& at(int node) { return nodes_.at(static_cast<std::size_t>(node)); }
    [[nodiscard]] const Node& at(int node) const {
        return nodes_.at(static_cast<std::size_t>(node));
    }
    /// The first waiting call node i may take, or pending_.end().
    std::deque<Task>::iterator pick(int node);
    void assign(int node, Task&& t, const Assigned& assigned);
    void forget_deadline(const Task& t);
    /// Every call of `q`, its deadline forgotten.
    std::vector<Task> drain(std::deque<Task>& q);

    std::map<int, Node> nodes_;  ///< by index, in order
    std::size_t concurrency_;
    std::size_t max_depth_;
    std::deque<Task> pending_;
    std::size_t rr_ = 0;
    std::uint64_t next_call_id_ = 0;
    std::uint64_t next_seq_ = 0;
    std::multimap<Clock::time_point, std::uint64_t> deadlines_;  ///< seq by deadline
    /// seq -> (node, call id) of calls with a deadline that are in flight
    std::unordered_map<std::uint64_t, std::pair<int, std::uint64_t>> timed_inflight_;
};

}  // namespace sky::detail
