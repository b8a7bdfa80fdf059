#include "pool/scheduler.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace sky::detail {

void Completion::deliver(std::vector<Completion>& done) {
    for (auto& c : done) {
        if (c.error)
            c.batch->fail(c.index, c.error);
        else
            c.batch->complete(c.index, std::move(c.result), c.node, std::move(c.instance_id),
                              std::move(c.log_tail));
    }
    done.clear();
}

std::exception_ptr timeout_error(const Task& t) {
    return std::make_exception_ptr(
        TimeoutError(fmt::format("{} did not finish within {} ms", t.call.function,
                                 t.call.options.timeout ? t.call.options.timeout->count() : 0)));
}

Scheduler::Scheduler(int nodes, int concurrency, std::size_t max_pipeline_depth)
    : concurrency_(static_cast<std::size_t>(std::max(1, concurrency))),
      max_depth_(std::max<std::size_t>(1, max_pipeline_depth)) {
    for (int i = 0; i < nodes; ++i) nodes_.emplace(i, Node{});
}

std::vector<int> Scheduler::node_ids() const {
    std::vector<int> v;
    v.reserve(nodes_.size());
    for (const auto& [i, n] : nodes_) v.push_back(i);
    return v;
}

int Scheduler::add_node() {
    int i = 0;
    // The map is ordered: the first gap, or one past the last.
    for (const auto& [id, n] : nodes_) {
        if (id != i) break;
        ++i;
    }
    nodes_.emplace(i, Node{});
    return i;
}

void Scheduler::add_node_at(int node) { nodes_.emplace(node, Node{}); }

std::size_t Scheduler::pinned_total() const {
    std::size_t n = 0;
    for (const auto& [i, node] : nodes_) n += node.pinned.size();
    return n;
}

std::size_t Scheduler::inflight_total() const {
    std::size_t n = 0;
    for (const auto& [i, node] : nodes_) n += node.inflight.size();
    return n;
}

std::vector<int> Scheduler::broadcast_nodes(const std::vector<int>& world) const {
    std::vector<int> v;
    for (const auto& [i, n] : nodes_) {
        if (!world.empty() && std::find(world.begin(), world.end(), i) == world.end()) continue;
        if (world.empty() && (n.state == NodeState::starting || n.state == NodeState::draining))
            continue;
        v.push_back(i);
    }
    return v;
}

std::vector<Task> Scheduler::retire_node(int node) {
    if (!has_node(node)) return {};
    std::vector<Task> failed = node_lost(node, NodeState::closed);
    nodes_.erase(node);
    return failed;
}

void Scheduler::set_workers(int node, int workers) { at(node).workers = std::max(1, workers); }

bool Scheduler::any_live() const {
    return std::any_of(nodes_.begin(), nodes_.end(), [](const auto& n) {
        return n.second.state == NodeState::ready || n.second.state == NodeState::restarting;
    });
}

bool Scheduler::others_live(int node) const {
    for (const auto& [j, n] : nodes_)
        if (j != node && (n.state == NodeState::ready || n.state == NodeState::restarting))
            return true;
    return false;
}

Task Scheduler::make_task(std::shared_ptr<BatchState> batch, std::size_t index,
                          const CallDesc& call, int pinned, Clock::time_point now) {
    Task t;
    t.batch = std::move(batch);
    t.index = index;
    t.call = call;
    t.retries_left = call.options.retries;
    t.pinned = pinned;
    t.seq = ++next_seq_;
    if (call.options.timeout) {
        t.deadline = now + *call.options.timeout;
        deadlines_.emplace(*t.deadline, t.seq);
    }
    return t;
}

void Scheduler::enqueue(Task t) { pending_.push_back(std::move(t)); }

void Scheduler::pin(Task t) { at(t.pinned).pinned.push_back(std::move(t)); }

std::size_t Scheduler::broadcast_size(bool per_rank, const std::vector<int>& world) const {
    const auto which = broadcast_nodes(world);
    if (!per_rank) return which.size();
    std::size_t n = 0;
    for (int i : which) n += static_cast<std::size_t>(at(i).workers);
    return n;
}

std::vector<std::pair<std::size_t, int>> Scheduler::broadcast(
    const std::shared_ptr<BatchState>& batch, const CallDesc& call, bool per_rank,
    Clock::time_point now, const std::vector<int>& world) {
    std::vector<std::pair<std::size_t, int>> unplaced;
    std::size_t item = 0;
    for (const int node : broadcast_nodes(world)) {
        const Node& n = at(node);
        const int ranks = per_rank ? n.workers : 1;
        // A node being replaced keeps its share: it runs on the replacement.
        const bool live = n.state == NodeState::ready || n.state == NodeState::restarting;
        for (int w = 0; w < ranks; ++w, ++item) {
            if (!live) {
                unplaced.emplace_back(item, node);
                continue;
            }
            Task t = make_task(batch, item, call, node, now);
            t.pinned_worker = per_rank ? w : -1;
            pin(std::move(t));
        }
    }
    return unplaced;
}

void Scheduler::dispatch(const Assigned& assigned) {
    std::size_t slots = 0;
    std::vector<std::pair<int, Node*>> order;  // by index: the rotation's order
    order.reserve(nodes_.size());
    for (auto& [i, n] : nodes_) {
        order.emplace_back(i, &n);
        if (n.state == NodeState::ready)
            slots += concurrency_ * static_cast<std::size_t>(n.workers);
    }
    if (slots == 0) return;
    const std::size_t N = order.size();
    bool progress = true;
    while (progress) {
        progress = false;
        // Deep pipes when a large batch waits (throughput), shallow otherwise (so that a slow
        // call does not hold others back behind it).
        const std::size_t depth = std::clamp<std::size_t>(pending_.size() / slots, 1, max_depth_);
        for (std::size_t k = 0; k < N; ++k) {
            const int i = order[(rr_ + k) % N].first;
            auto& n = *order[(rr_ + k) % N].second;
            if (n.state != NodeState::ready) continue;
            const std::size_t cap = concurrency_ * static_cast<std::size_t>(n.workers) * depth;
            if (n.inflight.size() >= cap) continue;
            if (!n.pinned.empty()) {
                Task t = std::move(n.pinned.front());
                n.pinned.pop_front();
                assign(i, std::move(t), assigned);
                progress = true;
            } else if (!pending_.empty()) {
                auto it = pick(i);
                if (it == pending_.end()) continue;
                Task t = std::move(*it);
                pending_.erase(it);
                assign(i, std::move(t), assigned);
                progress = true;
            }
        }
        rr_ = (rr_ + 1) % N;
    }
}

std::deque<Task>::iterator Scheduler::pick(int node) {
    // A retry goes to another node (api.md: .retries); on a one-node pool, to its replacement.
    // The look-ahead is bounded: a long run of such retries waits for the other nodes.
    const bool others = others_live(node);
    auto it = pending_.begin();
    for (int k = 0; it != pending_.end() && k < 64; ++it, ++k)
        if (!others || it->lost_on != node) return it;
    return pending_.end();
}

void Scheduler::assign(int node, Task&& t, const Assigned& assigned) {
    // Every attempt has an id of its own: a worker never runs the same id twice, and a retry
    // is a new call to the worker that gets it.
    const std::uint64_t id = ++next_call_id_;
    t.call_id = id;
    t.started = false;
    if (t.deadline) timed_inflight_[t.seq] = {node, id};
    auto [it, inserted] = at(node).inflight.emplace(id, std::move(t));
    assigned(node, id, it->second);
}

std::vector<std::string>* Scheduler::log_tail(int node, std::uint64_t call_id) {
    auto& inflight = at(node).inflight;
    auto it = inflight.find(call_id);
    return it == inflight.end() ? nullptr : &it->second.log_tail;
}

std::vector<const Task*> Scheduler::inflight_tasks(int node) const {
    std::vector<const Task*> v;
    for (const auto& [id, t] : at(node).inflight) v.push_back(&t);
    std::sort(v.begin(), v.end(),
              [](const Task* a, const Task* b) { return a->call_id < b->call_id; });
    return v;
}

Task* Scheduler::mark_started(int node, std::uint64_t call_id) {
    auto& inflight = at(node).inflight;
    auto it = inflight.find(call_id);
    if (it == inflight.end()) return nullptr;
    it->second.started = true;
    return &it->second;
}

std::optional<Task> Scheduler::take(int node, std::uint64_t call_id) {
    auto& inflight = at(node).inflight;
    auto it = inflight.find(call_id);
    if (it == inflight.end()) return std::nullopt;
    Task t = std::move(it->second);
    inflight.erase(it);
    forget_deadline(t);
    return t;
}

void Scheduler::forget_deadline(const Task& t) {
    if (!t.deadline) return;
    timed_inflight_.erase(t.seq);
    auto [from, to] = deadlines_.equal_range(*t.deadline);
    for (auto it = from; it != to; ++it)
        if (it->second == t.seq) {
            deadlines_.erase(it);
            return;
        }
}

std::vector<Task> Scheduler::node_lost(int node, NodeState now_state) {
    auto& n = at(node);
    n.state = now_state;
    std::vector<Task> failed;
    std::vector<Task> requeue;
    std::vector<Task> repin;  // a plain broadcast's share, run again on the node's replacement
    // In call-id order: retries run again in the order they were first sent.
    std::vector<std::uint64_t> ids;
    ids.reserve(n.inflight.size());
    for (auto& [id, t] : n.inflight) ids.push_back(id);
    std::sort(ids.begin(), ids.end());
    for (auto id : ids) {
        Task& t = n.inflight.at(id);
        if (t.deadline) timed_inflight_.erase(t.seq);  // its deadline still counts while it waits
        // At least once by default; at most once when asked: a call that started may have run
        // (its side effects done), so it is not run again.
        const bool may_have_run = t.started && t.call.options.at_most_once;
        // A share of a broadcast belongs to its node: it runs again there once the node is
        // replaced (api.md §10a: it resumes from what it saved). Not a per-rank call of a
        // distributed plugin: one rank alone would wait for peers that have ended.
        const bool share_may_rerun = t.pinned >= 0 && now_state == NodeState::restarting &&
                                     t.call.options.plugin.kind == PluginSpec::none;
        if (t.retries_left > 0 && (t.pinned < 0 || share_may_rerun) && !may_have_run) {
            --t.retries_left;
            t.lost_on = node;
            (t.pinned < 0 ? requeue : repin).push_back(std::move(t));
        } else {
            forget_deadline(t);
            failed.push_back(std::move(t));
        }
    }
    n.inflight.clear();
    for (auto it = requeue.rbegin(); it != requeue.rend(); ++it)
        pending_.push_front(std::move(*it));
    for (auto& t : drain_pinned(node)) failed.push_back(std::move(t));
    for (auto& t : repin) n.pinned.push_back(std::move(t));
    return failed;
}

std::vector<Task> Scheduler::drain(std::deque<Task>& q) {
    std::vector<Task> v;
    for (auto& t : q) {
        forget_deadline(t);
        v.push_back(std::move(t));
    }
    q.clear();
    return v;
}

std::vector<Task> Scheduler::drain_pinned(int node) { return drain(at(node).pinned); }

std::vector<Task> Scheduler::drain_waiting() { return drain(pending_); }

std::vector<Task> Scheduler::drain_all() {
    std::vector<Task> v = drain_waiting();
    for (auto& [i, n] : nodes_) {
        for (auto& t : drain(n.pinned)) v.push_back(std::move(t));
        for (auto& [id, t] : n.inflight) v.push_back(std::move(t));
        n.inflight.clear();
    }
    deadlines_.clear();
    timed_inflight_.clear();
    return v;
}

std::optional<Clock::time_point> Scheduler::next_deadline() const {
    if (deadlines_.empty()) return std::nullopt;
    return deadlines_.begin()->first;
}

Scheduler::Removed Scheduler::expire(Clock::time_point now) {
    Removed r;
    while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
        const std::uint64_t seq = deadlines_.begin()->second;
        deadlines_.erase(deadlines_.begin());
        if (auto it = timed_inflight_.find(seq); it != timed_inflight_.end()) {
            auto [node, call_id] = it->second;
            timed_inflight_.erase(it);
            auto& inflight = at(node).inflight;
            if (auto t = inflight.find(call_id); t != inflight.end()) {
                r.tasks.push_back(std::move(t->second));
                inflight.erase(t);
                r.cancels.emplace_back(node, call_id);
            }
            continue;
        }
        auto drop = [&](std::deque<Task>& q) {
            for (auto t = q.begin(); t != q.end(); ++t)
                if (t->seq == seq) {
                    r.tasks.push_back(std::move(*t));
                    q.erase(t);
                    return true;
                }
            return false;
        };
        if (!drop(pending_))
            for (auto& [i, n] : nodes_)
                if (drop(n.pinned)) break;
    }
    return r;
}

Scheduler::Removed Scheduler::cancel(const BatchState* b) {
    Removed r;
    auto sweep = [&](std::deque<Task>& q) {
        for (auto it = q.begin(); it != q.end();) {
            if (it->batch.get() == b) {
                forget_deadline(*it);
                r.tasks.push_back(std::move(*it));
                it = q.erase(it);
            } else {
                ++it;
            }
        }
    };
    sweep(pending_);
    for (auto& [i, n] : nodes_) {
        sweep(n.pinned);
        for (auto it = n.inflight.begin(); it != n.inflight.end();) {
            if (it->second.batch.get() == b) {
                forget_deadline(it->second);
                r.cancels.emplace_back(i, it->first);
                r.tasks.push_back(std::move(it->second));
                it = n.inflight.erase(it);
            } else {
                ++it;
            }
        }
    }
    return r;
}

}  // namespace sky::detail
