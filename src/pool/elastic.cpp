// An elastic pool's moves (api.md §4a): PoolCore gathers what the decision needs under its lock,
// asks pool/autoscale.hpp, and does what it says here. A node joins through the replacement's
// path (the backend adds it, connect() launches and bootstraps it, the handshake makes it
// ready); a node leaves by draining (no new call; ended once its calls finish, never killed);
// the budget stops the pool at its limit.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "pool/pool_core.hpp"

namespace sky::detail {

namespace {
// Joins that fail in a row before the calls that wait with no node fail with the error (the
// replacement's bound, docs/providers.md: "at most 3 times").
constexpr int max_scale_failures = 3;
// Pauses between failed joins: doubling from the first, at most the last.
constexpr auto scale_pause_first = std::chrono::seconds(1);
constexpr auto scale_pause_max = std::chrono::seconds(30);

std::string what_of(const std::exception_ptr& e) {
    try {
        std::rethrow_exception(e);
    } catch (const std::exception& x) {
        return x.what();
    } catch (...) {
        return "unknown error";
    }
}

bool is_config_error(const std::exception_ptr& e) {
    try {
        std::rethrow_exception(e);
    } catch (const ConfigError&) {
        return true;
    } catch (...) {
        return false;
    }
}
}  // namespace

// ---- what the decision sees -------------------------------------------------------------------

ScaleInput PoolCore::scale_input_locked() const {
    ScaleInput in;
    in.bounds = bounds_;
    in.desired = desired_;
    in.waiting = sched_->waiting();
    in.in_flight = sched_->inflight_total();
    in.pinned = sched_->pinned_total();
    in.capacity = static_cast<std::size_t>(std::max(1, spec_.concurrency)) *
                  static_cast<std::size_t>(std::max(1, workers_per_node_));
    for (const auto& n : nodes_) {
        ScaleNode x;
        x.index = n->index;
        x.started_at = n->joined_at;
        x.calls =
            sched_->has_node(n->index) ? sched_->inflight(n->index) + sched_->pinned(n->index) : 0;
        x.idle_since = n->busy || x.calls > 0 ? Clock::now() : n->idle_since;
        const auto st = sched_->has_node(n->index) ? sched_->state(n->index) : NodeState::closed;
        // Joining, being replaced or reconnecting: there, never chosen to end.
        x.starting = n->joining || st == NodeState::restarting || st == NodeState::starting;
        x.leaving = n->leaving || st == NodeState::lost || st == NodeState::closed;
        x.frozen = std::find(world_.begin(), world_.end(), n->index) != world_.end();
        in.nodes.push_back(x);
    }
    return in;
}

bool PoolCore::serving_locked() const {
    if (sched_->any_live() || joining_ > 0) return true;
    return elastic_ && !budget_stopped_ && !closing_;
}

int PoolCore::hourly_allows_locked(int want, Clock::time_point now) const {
    const double cap = spec_.budget.max_hourly_usd;
    if (!(cap > 0) || want <= 0 || !(price_ > 0)) return want;
    // The live nodes' rate (launched ones billed from their launch), and the ones still
    // joining whose machine is not launched yet at the likely price.
    int unbilled = 0;
    for (const auto& n : nodes_)
        if (n->joining && (n->instance.id.empty() || !cost_->known(n->instance.id))) ++unbilled;
    double rate = cost_->snapshot(now).hourly_rate + unbilled * price_;
    int allowed = 0;
    while (allowed < want && rate + price_ <= cap + 1e-9) {
        rate += price_;
        ++allowed;
    }
    return allowed;
}

// ---- the decision, and what it says -----------------------------------------------------------

void PoolCore::rescale_locked(Clock::time_point now, Scale& s) {
    if (closing_ || !active_ || budget_stopped_ || !sched_) return;
    if (!elastic_ && !desired_) return;  // a fixed pool moves only when resized
    const ScaleInput in = scale_input_locked();
    ScaleDecision d = decide_scale(in, now);
    if (!d.start.empty() && now < next_scale_try_) d.start.clear();  // after a failed join
    if (!d.start.empty()) {
        const int allowed = hourly_allows_locked(static_cast<int>(d.start.size()), now);
        const int refused = static_cast<int>(d.start.size()) - allowed;
        if (refused > 0 && refused != hourly_refused_)
            s.events.push_back(ErrorEvent{
                fmt::format("not starting {} of {} node(s): at ${:.3f}/h each they would pass "
                            "the budget's max_hourly_usd of ${:.3f}/h (the live nodes cost "
                            "${:.3f}/h)",
                            refused, d.start.size(), price_, spec_.budget.max_hourly_usd,
                            cost_->snapshot(now).hourly_rate),
                std::nullopt});
        hourly_refused_ = refused;
        d.start.resize(static_cast<std::size_t>(allowed));
    } else {
        hourly_refused_ = 0;
    }
    if (d.start.empty() && d.end.empty()) return;
    const std::size_t slots = static_cast<std::size_t>(std::max(d.there, 0)) * in.capacity;
    std::string reason;
    if (desired_)
        reason = fmt::format("resize({})", *desired_);
    else if (!d.start.empty())
        reason = fmt::format("{} waiting + {} running over {} slots", in.waiting + in.pinned,
                             in.in_flight, slots);
    else
        reason = fmt::format(
            "node(s) {} idle for {} s", fmt::join(d.end, ", "),
            std::chrono::duration_cast<std::chrono::seconds>(bounds_.scaledown_window).count());
    const int to = d.there + static_cast<int>(d.start.size()) - static_cast<int>(d.end.size());
    s.events.push_back(PoolScaled{d.there, to, reason});
    for (int i : d.start) {
        join_slot_locked(i, now);
        s.start.push_back(i);
    }
    for (int i : d.end)
        if (auto n = slot_locked(i)) {
            s.events.push_back(NodeDraining{i, n->instance.id, reason});
            leave_locked(*n, s);
        }
}

void PoolCore::leave_locked(NodeSlot& n, Scale& s) {
    n.leaving = true;
    if (sched_->has_node(n.index) && sched_->state(n.index) == NodeState::ready)
        sched_->set_state(n.index, NodeState::draining);
    touch_locked(n, Clock::now(), s);
}

void PoolCore::touch_locked(NodeSlot& n, Clock::time_point now, Scale& s) {
    if (!sched_->has_node(n.index)) return;
    const std::size_t calls = sched_->inflight(n.index) + sched_->pinned(n.index);
    if (calls > 0) {
        n.busy = true;
        return;
    }
    if (n.busy) {
        n.busy = false;
        n.idle_since = now;
    }
    // A leaving node whose calls are done ends now; one still joining ends once it has joined.
    if (n.leaving && !n.ending && !n.joining) {
        n.ending = true;
        s.end.push_back(n.index);
    }
}

void PoolCore::check_waiters_locked(Scale& s) {
    int ready = 0;
    bool moving = joining_ > 0;
    for (const auto& n : nodes_) {
        if (n->leaving) moving = true;
        if (!n->leaving && sched_->has_node(n->index) &&
            sched_->state(n->index) == NodeState::ready)
            ++ready;
    }
    for (auto it = waiters_.begin(); it != waiters_.end();) {
        const bool done = it->node >= 0 ? !slot_locked(it->node) : (!moving && ready == it->want);
        if (!done) {
            ++it;
            continue;
        }
        if (it->node < 0) desired_.reset();  // the resize is done: the bounds decide again
        s.waiters.emplace_back(it->batch, nullptr);
        it = waiters_.erase(it);
    }
}

void PoolCore::check_budget_locked(Clock::time_point now, Scale& s) {
    const Budget& b = spec_.budget;
    if (!(b.max_total_usd > 0) || budget_stopped_ || !cost_) return;
    // A running node's accrued cost is billed up to the end of its current billing unit: the
    // spend projected to the end of the live nodes' units.
    const CostSnapshot snap = cost_->snapshot(now);
    const double spent = snap.accumulated_cost;
    if (!budget_warned_ && spent >= b.warn_at * b.max_total_usd) {
        budget_warned_ = true;
        s.events.push_back(BudgetWarning{spent, b.max_total_usd});
    }
    if (spent < b.max_total_usd) {
        // Wake when the spend reaches the limit at the live nodes' rate.
        next_budget_ = Clock::time_point::max();
        if (snap.hourly_rate > 0) {
            const double secs = (b.max_total_usd - spent) / snap.hourly_rate * 3600.0;
            next_budget_ = now + std::chrono::milliseconds(static_cast<std::int64_t>(
                                     std::clamp(secs * 1000.0, 20.0, 3.6e6)));
        }
        return;
    }
    // The hard stop: nothing more is launched, every call fails, every node ends now.
    budget_stopped_ = true;
    next_budget_ = Clock::time_point::max();
    budget_error_ = std::make_exception_ptr(BudgetExceededError(
        fmt::format("pool {}: its budget of ${:.4f} is spent (${:.4f} projected to the end of "
                    "the live nodes' billing units): the pool launches nothing more, its nodes "
                    "are ended and no call runs",
                    id_, b.max_total_usd, spent),
        spent, b.max_total_usd));
    for (auto& t : sched_->drain_all()) s.done.push_back(Completion::failed(t, budget_error_));
    for (auto& w : waiters_) s.waiters.emplace_back(w.batch, budget_error_);
    waiters_.clear();
    fail_world_calls_locked(budget_error_, s);
    world_forming_ = false;
    desired_.reset();
    int there = 0;
    for (auto& n : nodes_) {
        if (!n->leaving) ++there;
        n->leaving = true;
        if (sched_->has_node(n->index) && sched_->state(n->index) == NodeState::ready)
            sched_->set_state(n->index, NodeState::draining);
        touch_locked(*n, now, s);
    }
    s.events.push_back(ErrorEvent{what_of(budget_error_), std::nullopt});
    s.events.push_back(PoolScaled{there, 0, "the budget's max_total_usd is reached"});
}

void PoolCore::act(Scale& s) {
    for (auto& e : s.events) emit(std::move(e));
    s.events.clear();
    Completion::deliver(s.done);
    for (auto& [batch, e] : s.waiters) {
        if (e)
            batch->fail(0, e);
        else
            batch->complete(0, Buffer{});
    }
    s.waiters.clear();
    for (int i : s.start) run_blocking([self = shared_from_this(), i] { self->join(i); });
    for (int i : s.end) run_blocking([self = shared_from_this(), i] { self->end_node(i); });
    s.start.clear();
    s.end.clear();
}

// ---- a node joins -----------------------------------------------------------------------------

void PoolCore::join(int i) {
    const auto emit_fn = [this](Event e) { emit(std::move(e)); };
    try {
        backend_->add({i}, emit_fn);
        attach(i, backend_->connect(i, emit_fn),
               [self = shared_from_this(), i](std::exception_ptr e) {
                   self->joined(i, std::move(e));
               });
    } catch (...) {
        joined(i, std::current_exception());
    }
}

void PoolCore::joined(int i, std::exception_ptr e) {
    Sends sends;
    Scale s;
    std::string id;
    std::optional<CostSnapshot> cost;
    bool ok = !e;
    {
        std::lock_guard lk(m_);
        const auto n = slot_locked(i);
        if (closing_ || !n || !n->joining) return;
        n->joining = false;
        --joining_;
        id = n->instance.id;
        const auto now = Clock::now();
        if (ok) {
            n->life.started();
            n->idle_since = now;
            price_ = std::max(price_, n->instance.hourly_price);
            scale_failures_ = 0;
            sched_->set_state(i, n->leaving ? NodeState::draining : NodeState::ready);
            if (budget_stopped_) n->leaving = true;
            place_world_calls_locked(now, s);
            dispatch_locked(sends);
            touch_locked(*n, now, s);
            cost = cost_->snapshot(now);
        } else {
            ++scale_failures_;
            const int k = std::min(scale_failures_ - 1, 5);
            next_scale_try_ =
                now + std::min<Clock::duration>(scale_pause_first * (1 << k), scale_pause_max);
            // The node leaves as any other (what its launch started is released), its index
            // taken until then.
            n->leaving = true;
            n->ending = true;
            sched_->set_state(i, NodeState::lost);
            s.end.push_back(i);
            // A provider that cannot add nodes says so once: no retry helps.
            const bool final = is_config_error(e) || scale_failures_ >= max_scale_failures;
            world_join_failed_locked(i, e, final, s);
            s.events.push_back(ErrorEvent{
                fmt::format("node {}: scale-up failed (attempt {} of {}): {}{}", i, scale_failures_,
                            max_scale_failures, what_of(e), final ? "" : "; trying again"),
                id.empty() ? std::nullopt : std::optional<std::string>(id)});
            if (final) {
                scale_failures_ = 0;
                if (is_config_error(e)) next_scale_try_ = now + scale_pause_max;
                for (auto it = waiters_.begin(); it != waiters_.end();)
                    if (it->node < 0) {
                        s.waiters.emplace_back(it->batch, e);
                        desired_.reset();
                        it = waiters_.erase(it);
                    } else {
                        ++it;
                    }
                // With no node left, the calls that wait fail with the launch's error: a lazy
                // pool never hangs.
                if (!sched_->any_live() && joining_ == 0) {
                    for (auto& t : sched_->drain_waiting())
                        s.done.push_back(Completion::failed(t, e));
                    for (auto& t : sched_->drain_pinned(i))
                        s.done.push_back(Completion::failed(t, e));
                }
            }
        }
        check_waiters_locked(s);
        rescale_locked(now, s);
    }
    send(sends);
    act(s);
    if (ok && cost && cost->hourly_rate > 0)
        emit(CostUpdate{cost->elapsed_seconds, cost->accumulated_cost, cost->hourly_rate,
                        cost->spot_count, cost->ondemand_count});
}

// ---- a node leaves ----------------------------------------------------------------------------

void PoolCore::end_node(int i) {
    std::shared_ptr<NodeConnection> conn;
    std::string id;
    {
        std::lock_guard lk(m_);
        const auto n = slot_locked(i);
        if (closing_ || !n) return;
        conn = std::move(n->conn);
        id = n->instance.id;
        // Events of its connection that arrive late are dropped.
        n->generation = ++generations_;
        if (sched_->has_node(i)) sched_->set_state(i, NodeState::closed);
    }
    if (!id.empty()) emit(InstanceStopping{id});
    if (conn) {
        conn->write_control(MsgType::shutdown, 0);
        conn->close();  // its ended callback does not run for this
    }
    std::string failure;
    try {
        backend_->release(i);
    } catch (const std::exception& e) {
        failure = e.what();
    }
    preempt_->node_gone(i);
    Scale s;
    std::optional<CostSnapshot> cost;
    {
        std::lock_guard lk(m_);
        if (closing_) return;
        const auto now = Clock::now();
        // Billed up to its confirmed end (release() returns once the backend confirmed it).
        if (!id.empty()) cost_->stop(id, now);
        std::exception_ptr gone = std::make_exception_ptr(
            NodeLostError(i, id, NodeLostError::Reason::unreachable, "the node left the pool"));
        for (auto& t : sched_->retire_node(i)) s.done.push_back(Completion::failed(t, gone));
        std::erase_if(nodes_, [&](const auto& n) { return n->index == i; });
        check_waiters_locked(s);
        rescale_locked(now, s);
        fail_waiting_if_none_live_locked(s.done);
        cost = cost_->snapshot(now);
    }
    if (!failure.empty())
        emit(ErrorEvent{fmt::format("node {}: ending it failed: {}; `sky gc` ends what is left "
                                    "(the ledger names it)",
                                    i, failure),
                        id.empty() ? std::nullopt : std::optional<std::string>(id)});
    act(s);
    if (cost && (cost->hourly_rate > 0 || cost->accumulated_cost > 0))
        emit(CostUpdate{cost->elapsed_seconds, cost->accumulated_cost, cost->hourly_rate,
                        cost->spot_count, cost->ondemand_count});
}

// ---- the public moves -------------------------------------------------------------------------

std::shared_ptr<BatchState> PoolCore::resize(int want) {
    Scale s;
    std::shared_ptr<BatchState> batch;
    {
        std::lock_guard lk(m_);
        if (closing_ || !active_) throw Error("pool.resize(): the pool is closed");
        if (budget_stopped_) std::rethrow_exception(budget_error_);
        if (want < 0 || want > 4096)
            throw ConfigError(fmt::format("pool.resize(n): n must be in [0, 4096], got {}", want));
        if (elastic_) want = std::clamp(want, bounds_.min, bounds_.max);
        int there = 0, removable = 0;
        for (const auto& n : nodes_) {
            if (n->leaving) continue;
            ++there;
            if (std::find(world_.begin(), world_.end(), n->index) == world_.end()) ++removable;
        }
        if (there - want > removable)
            throw NotResizableError(fmt::format(
                "pool.resize({}): it would remove a node of the world that distributed calls "
                "froze ({} of its {} nodes are that world's); call pool.release_world() first",
                want, there - removable, there));
        // A resize in progress gives way to this one.
        for (auto it = waiters_.begin(); it != waiters_.end();)
            if (it->node < 0) {
                s.waiters.emplace_back(
                    it->batch,
                    std::make_exception_ptr(CancelledError(fmt::format("a later pool.resize({}) "
                                                                       "replaced this one",
                                                                       want))));
                it = waiters_.erase(it);
            } else {
                ++it;
            }
        if (!elastic_) bounds_ = ScaleBounds{want, want, Clock::duration::max()};
        desired_ = want;
        batch = std::make_shared<BatchState>(1);
        waiters_.push_back({batch, want, -1});
        scale_failures_ = 0;
        next_scale_try_ = {};
        const auto now = Clock::now();
        rescale_locked(now, s);
        check_waiters_locked(s);
    }
    act(s);
    return batch;
}

void PoolCore::resize(const Autoscale& a) {
    auto bad = [](const std::string& m) { throw ConfigError("pool.resize(Autoscale): " + m); };
    if (a.max < 0 || a.max > 4096)
        bad(fmt::format("autoscale.max must be in [0, 4096] (0: autoscaling off), got {}", a.max));
    if (a.min < 0) bad(fmt::format("autoscale.min must be at least 0, got {}", a.min));
    if (a.max > 0 && a.min > a.max)
        bad(fmt::format("autoscale.min ({}) is more than autoscale.max ({})", a.min, a.max));
    if (a.scaledown_window.count() < 0)
        bad(fmt::format("autoscale.scaledown_window must not be negative, got {} s",
                        a.scaledown_window.count()));
    Scale s;
    {
        std::lock_guard lk(m_);
        if (closing_ || !active_) throw Error("pool.resize(): the pool is closed");
        if (a.max == 0) {
            // Autoscaling off: the pool keeps the nodes it has now.
            int there = 0;
            for (const auto& n : nodes_)
                if (!n->leaving) ++there;
            elastic_ = false;
            bounds_ = ScaleBounds{there, there, Clock::duration::max()};
        } else {
            elastic_ = true;
            bounds_ = ScaleBounds{a.min, a.max, a.scaledown_window};
        }
        scale_failures_ = 0;
        next_scale_try_ = {};
        rescale_locked(Clock::now(), s);
    }
    act(s);
}

std::shared_ptr<BatchState> PoolCore::drain(int node) {
    Scale s;
    std::shared_ptr<BatchState> batch;
    {
        std::lock_guard lk(m_);
        if (closing_ || !active_) throw Error("pool.drain(): the pool is closed");
        const auto n = slot_locked(node);
        if (!n) {
            const int limit = elastic_ ? bounds_.max : static_cast<int>(nodes_.size());
            throw ConfigError(fmt::format("pool.drain({}): the pool has no node {} now{}", node,
                                          node,
                                          node < 0 || node >= std::max(limit, 1)
                                              ? fmt::format(" (its nodes are below {})", limit)
                                              : std::string()));
        }
        if (std::find(world_.begin(), world_.end(), node) != world_.end())
            throw NotResizableError(fmt::format(
                "pool.drain({}): node {} belongs to the world that distributed calls froze; "
                "call pool.release_world() first",
                node, node));
        batch = std::make_shared<BatchState>(1);
        waiters_.push_back({batch, -1, node});
        if (!n->leaving) {
            int there = 0;
            for (const auto& x : nodes_)
                if (!x->leaving) ++there;
            // A fixed pool's size drops by one; an elastic pool's target decides.
            if (!elastic_) {
                const int size = std::max(0, there - 1);
                bounds_ = ScaleBounds{size, size, Clock::duration::max()};
            }
            s.events.push_back(NodeDraining{node, n->instance.id, "pool.drain()"});
            s.events.push_back(PoolScaled{there, there - 1, fmt::format("drain({})", node)});
            leave_locked(*n, s);
            rescale_locked(Clock::now(), s);
        }
    }
    act(s);
    return batch;
}

void PoolCore::release_world() {
    std::lock_guard lk(m_);
    // A world being woken stays until its calls are placed: they were made for it.
    if (world_forming_)
        release_world_when_placed_ = true;
    else
        world_.clear();
}

// ---- a distributed call that wakes its world --------------------------------------------------

void PoolCore::join_slot_locked(int i, Clock::time_point now) {
    auto& n = add_slot_locked(i);
    n.joined_at = now;
    n.idle_since = now;
    n.busy = false;
    n.joining = true;
    n.leaving = n.ending = false;
    n.restarts = 0;
    n.life = NodeLife{};
    sched_->add_node_at(i);
    ++joining_;
}

int PoolCore::wake_slot_locked(Clock::time_point now) {
    int i = 0;
    while (slot_locked(i) || sched_->has_node(i)) ++i;
    join_slot_locked(i, now);
    return i;
}

std::shared_ptr<BatchState> PoolCore::submit_to_waking_world(const CallDesc& call) {
    Scale s;
    std::shared_ptr<BatchState> batch;
    {
        std::lock_guard lk(m_);
        if (!sched_ || !active_ || closing_ || !elastic_ || budget_stopped_) return nullptr;
        if (!world_forming_ && !(world_.empty() && sched_->broadcast_nodes().empty()))
            return nullptr;
        const auto now = Clock::now();
        batch = std::make_shared<BatchState>(1);
        batch->cancel = [core = weak_from_this(), raw = batch.get()] {
            auto c = core.lock();
            return c ? c->cancel_batch(raw) : false;
        };
        if (!world_forming_) {
            // The world: the nodes already joining, then fresh ones, max(min, 1) in all; the
            // number of ranks is known once they are ready (one per worker process).
            const int count = std::clamp(bounds_.min, 1, std::max(bounds_.max, 1));
            int there = 0;
            std::vector<int> world;
            for (const auto& n : nodes_) {
                if (n->leaving) continue;
                ++there;
                if (n->joining && static_cast<int>(world.size()) < count) world.push_back(n->index);
            }
            const int want = count - static_cast<int>(world.size());
            const int fresh = hourly_allows_locked(want, now);
            if (fresh < want && world.empty()) {
                batch->fail(0, std::make_exception_ptr(ConfigError(fmt::format(
                                   "a distributed call on pool {} with no ready node: waking a "
                                   "node at ${:.3f}/h would pass the budget's max_hourly_usd of "
                                   "${:.3f}/h",
                                   id_, price_, spec_.budget.max_hourly_usd))));
                return batch;
            }
            for (int k = 0; k < fresh; ++k) {
                world.push_back(wake_slot_locked(now));
                s.start.push_back(world.back());
            }
            std::sort(world.begin(), world.end());
            world_ = std::move(world);
            world_forming_ = true;
            release_world_when_placed_ = false;
            if (fresh > 0)
                s.events.push_back(
                    PoolScaled{there, there + fresh,
                               fmt::format("a distributed call on a pool with no ready node wakes "
                                           "{} node(s) as its world",
                                           world_.size())});
        }
        world_calls_.push_back({batch, call, now});
    }
    act(s);
    return batch;
}

void PoolCore::place_world_calls_locked(Clock::time_point now, Scale& s) {
    (void)now;
    if (!world_forming_) return;
    for (const int i : world_)
        if (!sched_->has_node(i) || sched_->state(i) != NodeState::ready) return;
    world_forming_ = false;
    // Every rank learns the world before its call: written before any of them is dispatched.
    send_world_layout_locked();
    for (auto& w : world_calls_) {
        w.batch->grow(sched_->broadcast_size(true, world_));
        // Placed as if submitted then: a .timeout() counts the wake.
        for (auto [item, node] : sched_->broadcast(w.batch, w.call, true, w.submitted, world_))
            s.done.push_back(
                {w.batch,
                 item,
                 {},
                 std::make_exception_ptr(NodeLostError(
                     node, instance_id_locked(node), NodeLostError::Reason::unreachable,
                     "the node was lost before its world formed"))});
    }
    world_calls_.clear();
    if (release_world_when_placed_) world_.clear();
    release_world_when_placed_ = false;
    timer_sooner_locked();
}

void PoolCore::world_join_failed_locked(int i, const std::exception_ptr& e, bool final, Scale& s) {
    if (!world_forming_) return;
    const auto it = std::find(world_.begin(), world_.end(), i);
    if (it == world_.end()) return;
    world_.erase(it);
    if (!final) {
        // Another node takes its place in the world at once (i stays taken until its end).
        world_.push_back(wake_slot_locked(Clock::now()));
        s.start.push_back(world_.back());
        std::sort(world_.begin(), world_.end());
        return;
    }
    fail_world_calls_locked(e, s);
    world_.clear();
    world_forming_ = false;
}

void PoolCore::expire_world_calls_locked(Clock::time_point now, Scale& s) {
    for (auto it = world_calls_.begin(); it != world_calls_.end();) {
        const auto& t = it->call.options.timeout;
        if (!t || now < it->submitted + *t) {
            ++it;
            continue;
        }
        s.waiters.emplace_back(
            it->batch, std::make_exception_ptr(TimeoutError(fmt::format(
                           "{} did not finish within {} ms: it was still waiting for a node",
                           it->call.function, t->count()))));
        it = world_calls_.erase(it);
    }
}

void PoolCore::fail_world_calls_locked(const std::exception_ptr& e, Scale& s) {
    for (auto& w : world_calls_) s.waiters.emplace_back(w.batch, e);
    world_calls_.clear();
}

}  // namespace sky::detail
