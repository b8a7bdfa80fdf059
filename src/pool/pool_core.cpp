#include "pool/pool_core.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

#include "metrics/metrics.hpp"
#include "pool/ledger.hpp"
#include "pool/lost_call.hpp"
#include "pool/signals.hpp"
#include "providers/registry/exposure.hpp"
#include "providers/registry/registry.hpp"
#include "runtime/worker.hpp"
#include "sky/detail/serialize.hpp"
#include "util/random.hpp"

namespace sky::detail {

namespace {
// How many calls may wait in a node's pipe beyond its running slots (Scheduler::dispatch).
constexpr std::size_t max_pipeline_depth = 64;
constexpr int max_restarts = 3;
}  // namespace

PoolCore::PoolCore(PoolSpec spec, std::unique_ptr<Backend> backend)
    : spec_(std::move(spec)), id_(random_hex(8)), backend_(std::move(backend)) {}

PoolCore::~PoolCore() {
    try {
        close(false);
    } catch (...) {
    }
}

void PoolCore::start() {
    if (!initialised())
        throw ConfigError(
            "sky::init(argc, argv) was not called: make it the first line of main() so that "
            "worker processes of this program can serve calls");
    spec_.validate();
    bus_ = std::make_unique<EventBus>(spec_.display, spec_.on_event, [this] {
        std::vector<int> running;
        std::lock_guard lk(m_);
        for (int i = 0; sched_ && i < sched_->nodes(); ++i)
            running.push_back(static_cast<int>(std::min<std::size_t>(
                sched_->inflight(i), static_cast<std::size_t>(spec_.concurrency))));
        return running;
    });
    started_at_ = Clock::now();
    cost_ = std::make_unique<CostTracker>(started_at_);
    try {
        // Written before anything is started: `sky gc` finds what a killed client left.
        ledger_ = Ledger::open(id_, spec_.provider.name(), "");
        if (!backend_) backend_ = make_backend(BackendContext{spec_, id_, ledger_.get()});
        {
            std::lock_guard lk(m_);
            sched_ =
                std::make_unique<Scheduler>(spec_.nodes, spec_.concurrency, max_pipeline_depth);
        }
        for (int i = 0; i < spec_.nodes; ++i) {
            auto n = std::make_unique<NodeSlot>();
            n->index = i;
            nodes_.push_back(std::move(n));
        }
        // From here (backend and node slots in place, nothing started yet) a SIGINT, SIGTERM or
        // SIGHUP closes this pool before the program ends.
        signals::register_pool(weak_from_this());
        backend_->provision(spec_.nodes, [this](Event e) { emit(std::move(e)); });
        std::vector<std::exception_ptr> errors(nodes_.size());
        std::vector<std::thread> threads;
        for (int i = 0; i < spec_.nodes; ++i)
            threads.emplace_back([&, i] {
                try {
                    connect_node(i);
                } catch (...) {
                    errors[static_cast<std::size_t>(i)] = std::current_exception();
                }
            });
        for (auto& t : threads) t.join();
        for (auto& e : errors)
            if (e) std::rethrow_exception(e);
        send_layout();
        {
            std::lock_guard lk(m_);
            active_ = true;
            for (int i = 0; i < sched_->nodes(); ++i) sched_->set_state(i, NodeState::ready);
        }
        for (auto& n : nodes_) n->reader = std::thread([this, p = n.get()] { reader_loop(p); });
        supervisor_ = std::thread([this] { supervisor_loop(); });
        emit(PoolStarted{id_, spec_.nodes});
    } catch (...) {
        close(false);
        throw;
    }
}

void PoolCore::connect_node(int i) {
    auto& n = *nodes_[static_cast<std::size_t>(i)];
    attach(n, backend_->connect(i, [this](Event e) { emit(std::move(e)); }));
}

void PoolCore::cost_started(const Instance& i) {
    std::lock_guard lk(m_);
    // A worker restarted on the machine it was lost on (SSH, Local: the same instance id) runs
    // on a machine whose bill never stopped.
    if (cost_->known(i.id)) return cost_->resume(i.id);
    // Instance carries the rate it runs at; on-demand instances are their own baseline.
    cost_->start(i.id, i.provider, i.spot, i.hourly_price,
                 i.spot ? i.on_demand_price : i.hourly_price, Clock::now());
}

void PoolCore::attach(NodeSlot& n, NodeStart s) {
    {
        // A signal's teardown may run close() while the node starts: it shuts the channel down.
        std::lock_guard lk(n.write_m);
        n.channel = std::make_unique<ClientChannel>(
            std::move(s.transport), fmt::format("node {} ({})", n.index, s.instance.id));
    }
    {
        std::lock_guard lk(m_);
        n.instance = s.instance;
        if (closing_) throw CancelledError("the pool was closed while it started");
    }
    cost_started(n.instance);
    ClientChannel::Handshake h;
    h.token = s.token;
    // A worker answers in well under a second. One silent for as long as a node may go without
    // its client (idle_timeout) is treated as gone, within [5 s, 60 s].
    h.hello_bound = std::clamp<std::chrono::seconds>(spec_.idle_timeout, std::chrono::seconds(5),
                                                     std::chrono::seconds(60));
    h.on_log = [this, &n](LogMsg m) {
        emit(LogLine{n.index, n.instance.id, std::move(m.line), m.timestamp});
    };
    auto& ch = h.hello;
    ch.pool_id = id_;
    ch.instance_id = n.instance.id;
    ch.node = n.index;
    ch.total_nodes = spec_.nodes;
    ch.concurrency = spec_.concurrency;
    ch.head_addr = backend_->head_address();
    ch.head_port = 0;  // the head's port comes with the layout, once every node is ready
    ch.private_addr = n.instance.private_ip.value_or(n.instance.public_ip.value_or(""));
    if (spec_.accelerator) {
        ch.accelerator = spec_.accelerator->to_string();
        for (int k = 0; k < spec_.accelerator->count; ++k)
            ch.accelerators.push_back(spec_.accelerator->name);
    }
    ch.idle_timeout_s = spec_.idle_timeout.count();
    ch.hard_timeout_s = spec_.timeout.count();
    ch.collect_metrics = spec_.collect_metrics;
    // SKY_METRICS_INTERVAL_MS shortens the sampling interval (tests, dashboards).
    if (const char* iv = std::getenv("SKY_METRICS_INTERVAL_MS"))
        ch.metrics_interval_ms = std::atoll(iv);
    const WorkerReady ready = n.channel->handshake(h);
    // Heard from just now: a replacement is not judged by its predecessor's silence.
    n.last_heard = Clock::now().time_since_epoch().count();
    bool running;
    {
        std::lock_guard lk(m_);
        sched_->set_workers(n.index, ready.workers);
        n.ports = ready.ports;
        running = active_;
    }
    if (running) send_layout(&n);  // a replacement: every node learns its new ports
}

template <class Write>
void PoolCore::write_to(NodeSlot& n, Write&& write) {
    std::lock_guard lk(n.write_m);
    if (!n.channel) return;
    try {
        write(*n.channel);
    } catch (...) {
        // The reader sees the broken connection and handles the loss.
        n.channel->shutdown();
    }
}

void PoolCore::send_layout(const NodeSlot* joining) {
    PoolLayout l;
    std::vector<NodeSlot*> to;
    {
        std::lock_guard lk(m_);
        for (auto& x : nodes_) {
            if (!joining || x.get() == joining || sched_->state(x->index) == NodeState::ready)
                to.push_back(x.get());
            std::string addr = x->instance.private_ip.value_or(x->instance.public_ip.value_or(""));
            if (addr.empty() && x->index == 0) addr = backend_->head_address();
            l.peers.push_back(addr);
            const int workers = sched_->workers(x->index);
            l.workers.push_back(workers);
            auto ports = x->ports;
            ports.resize(static_cast<std::size_t>(workers), 0);
            l.ports.push_back(std::move(ports));
        }
    }
    Buffer payload;
    save_to(payload, l);
    for (auto* x : to)
        write_to(*x, [&](ClientChannel& c) { c.write_frame(MsgType::layout, payload.span()); });
}

std::shared_ptr<BatchState> PoolCore::submit(const std::vector<const CallDesc*>& calls,
                                             bool broadcast) {
    // A broadcast with a distributed plugin runs once per rank: W calls on each node.
    const bool per_rank =
        broadcast && !calls.empty() && calls[0]->options.plugin.kind != PluginSpec::none;
    // What the framework's unauthenticated rendezvous exposes here, said once per pool.
    if (!calls.empty() && calls[0]->options.plugin.kind != PluginSpec::none &&
        !exposure_noticed_.exchange(true))
        notice_distributed_exposure(spec_, [this](Event e) { emit(std::move(e)); });
    std::vector<int> ranks_on(nodes_.size(), 1);
    if (per_rank) {
        std::lock_guard lk(m_);
        for (std::size_t i = 0; i < nodes_.size(); ++i)
            ranks_on[i] = sched_ ? sched_->workers(static_cast<int>(i)) : 1;
    }
    std::size_t ranks = 0;
    for (int r : ranks_on) ranks += static_cast<std::size_t>(r);
    const std::size_t n = broadcast ? ranks : calls.size();
    auto batch = std::make_shared<BatchState>(n);
    // A Future may outlive its pool: cancelling then finds nothing to cancel.
    BatchState* raw = batch.get();
    batch->cancel = [core = weak_from_this(), raw] {
        auto c = core.lock();
        return c ? c->cancel_batch(raw) : false;
    };
    if (n == 0) return batch;
    std::vector<Outgoing> out(nodes_.size());
    std::vector<Completion> done;
    {
        std::lock_guard lk(m_);
        const auto now = Clock::now();
        if (closing_ || !active_) {
            for (std::size_t i = 0; i < n; ++i)
                done.push_back(
                    {batch, i, {}, std::make_exception_ptr(Error("the pool is closed"))});
        } else if (broadcast) {
            std::size_t index = 0;  // rank order: node 0's worker processes first
            for (std::size_t i = 0; i < nodes_.size(); ++i) {
                auto& node = *nodes_[i];
                const auto state = sched_->state(static_cast<int>(i));
                for (int w = 0; w < ranks_on[i]; ++w, ++index) {
                    if (state == NodeState::ready || state == NodeState::restarting) {
                        Task t =
                            sched_->make_task(batch, index, *calls[0], static_cast<int>(i), now);
                        t.pinned_worker = per_rank ? w : -1;
                        sched_->pin(std::move(t));
                    } else {
                        done.push_back(
                            {batch,
                             index,
                             {},
                             std::make_exception_ptr(NodeLostError(
                                 static_cast<int>(i), node.instance.id,
                                 NodeLostError::Reason::unreachable,
                                 "the node was lost earlier and could not be replaced"))});
                    }
                }
            }
        } else if (!sched_->any_live()) {
            // Every node is gone for good (lost, past the pool's timeout, not replaceable):
            // waiting could only be forever.
            for (std::size_t i = 0; i < n; ++i)
                done.push_back({batch, i, {}, no_live_node_locked(now)});
        } else {
            for (std::size_t i = 0; i < n; ++i)
                sched_->enqueue(sched_->make_task(batch, i, *calls[i], -1, now));
        }
        if (sched_) {  // none before start()
            dispatch_locked(out);
            if (sched_->next_deadline()) sup_cv_.notify_one();
        }
    }
    send(out);
    Completion::deliver(done);
    return batch;
}

void PoolCore::dispatch_locked(std::vector<Outgoing>& out) {
    sched_->dispatch([&](int node, std::uint64_t call_id, const Task& t) {
        encode_call(out[static_cast<std::size_t>(node)], call_id, t.call, t.pinned_worker);
    });
}

void PoolCore::send(std::vector<Outgoing>& out) {
    for (std::size_t i = 0; i < out.size(); ++i) {
        if (out[i].empty()) continue;
        write_to(*nodes_[i], [&](ClientChannel& c) { c.write(out[i]); });
        out[i].clear();
    }
}

void PoolCore::send_control(NodeSlot& n, MsgType type, std::uint64_t call_id) {
    write_to(n, [&](ClientChannel& c) { c.write_control(type, call_id); });
}

std::exception_ptr PoolCore::error_from(const NodeSlot& n, const Task& t, ErrorMsg e) {
    if (e.kind == ErrorMsg::cancelled)
        return std::make_exception_ptr(
            CancelledError(fmt::format("{} was cancelled before it started", t.call.function)));
    if (e.log_tail.empty()) e.log_tail = t.log_tail;
    return std::make_exception_ptr(RemoteError(std::string(t.call.function), n.index, n.instance.id,
                                               e.type_name, e.message, std::move(e.log_tail)));
}

void PoolCore::reader_loop(NodeSlot* n) {
    std::string why = "the worker closed the connection";
    bool protocol_error = false;
    // Results, errors and call output read in one go are handled under one lock.
    std::vector<Incoming> got;
    std::vector<Outgoing> out(nodes_.size());
    std::vector<Completion> done;
    std::vector<std::uint64_t> confirms;  // at-most-once calls the client now counts as started
    auto flush = [&] {
        if (got.empty()) return;
        {
            std::lock_guard lk(m_);
            const auto now = Clock::now();
            for (auto& r : got) {
                if (r.type == MsgType::started) {
                    // Marked started before the worker may run it: only then is it confirmed.
                    const Task* t = sched_->mark_started(n->index, r.call_id);
                    if (t && t->call.options.at_most_once) confirms.push_back(r.call_id);
                    continue;
                }
                if (r.type == MsgType::log) {
                    if (auto* tail = sched_->log_tail(n->index, r.call_id)) {
                        tail->push_back(std::move(r.log.line));
                        if (tail->size() > 20) tail->erase(tail->begin());
                    }
                    continue;
                }
                auto t = sched_->take(n->index, r.call_id);
                if (!t) continue;  // timed out or cancelled already
                // A result after the call's deadline (the supervisor had not got to it yet)
                // did not finish in time: the call fails as its .timeout() says.
                if (t->late(now))
                    done.push_back(Completion::failed(*t, timeout_error(*t)));
                else if (r.type == MsgType::result)
                    done.push_back({t->batch, t->index, std::move(r.payload), nullptr, n->index,
                                    n->instance.id, std::move(t->log_tail)});
                else
                    done.push_back(Completion::failed(*t, error_from(*n, *t, std::move(r.error))));
            }
            dispatch_locked(out);
        }
        got.clear();
        for (auto id : confirms) send_control(*n, MsgType::confirm, id);
        confirms.clear();
        send(out);
        Completion::deliver(done);
    };
    try {
        ClientChannel& channel = *n->channel;  // replaced only after this thread is joined
        n->last_heard = Clock::now().time_since_epoch().count();
        for (Incoming in; channel.next(in);) {
            n->last_heard = Clock::now().time_since_epoch().count();
            switch (in.type) {
                case MsgType::result:
                case MsgType::error:
                case MsgType::started:
                    got.push_back(std::move(in));
                    break;
                case MsgType::log:
                    emit(LogLine{n->index, n->instance.id, in.log.line, in.log.timestamp});
                    if (in.call_id) got.push_back(std::move(in));
                    break;
                case MsgType::metrics: {
                    const auto& m = in.metrics;
                    emit(Metrics{n->instance.id, n->index, m.cpu_percent, m.memory_percent,
                                 m.memory_used_mb, m.memory_total_mb, m.gpu_utilization,
                                 m.gpu_memory_used_mb, m.gpu_memory_total_mb, m.gpu_temperature});
                    break;
                }
                default:  // heartbeat
                    break;
            }
            if (!channel.has_buffered()) flush();
        }
    } catch (const ProtocolError& e) {
        why = e.what();
        protocol_error = true;
    } catch (const std::exception& e) {
        why = e.what();
    }
    flush();
    node_lost(n, why, protocol_error);
}

void PoolCore::node_lost(NodeSlot* n, const std::string& why, bool protocol_error) {
    bool closing;
    {
        std::lock_guard lk(m_);
        closing = closing_;
    }
    {
        std::lock_guard wl(n->write_m);
        if (n->channel) n->channel->shutdown();
    }
    NodeExit ex;
    if (protocol_error) {
        ex = {NodeLostError::Reason::unreachable, why};
        emit(ErrorEvent{
            fmt::format("node {}: protocol error, closing its connection: {}", n->index, why),
            n->instance.id});
    } else if (!closing) {
        ex = backend_->exit_reason(n->index);
        // The supervisor ended a silent node: that, not the closed connection, is the reason.
        if (n->silent.exchange(false) && ex.reason == NodeLostError::Reason::unreachable) {
            std::lock_guard wl(n->write_m);
            ex.detail = n->silence_reason;
        }
    }
    std::vector<Outgoing> out(nodes_.size());
    std::vector<Completion> done;
    bool restart = false;
    {
        std::lock_guard lk(m_);
        if (closing_) {
            sched_->set_state(n->index, NodeState::closed);
            return;
        }
        n->lost_reason = ex.reason;
        n->lost_detail = ex.detail;
        cost_->stop(n->instance.id, Clock::now());
        if (backend_->can_restart(n->index) && n->restarts < max_restarts &&
            Clock::now() - started_at_ < spec_.timeout) {
            ++n->restarts;
            restart_queue_.push_back(n->index);
            restart = true;
        }
        // Calls with retries left wait for another node (or the replacement); the rest fail.
        mark_crash_started(*sched_, n->index, ex);
        for (auto& t :
             sched_->node_lost(n->index, restart ? NodeState::restarting : NodeState::lost))
            done.push_back(Completion::failed(t, lost_call_error(n->index, n->instance.id, ex, t)));
        dispatch_locked(out);
        fail_waiting_if_none_live_locked(done);
    }
    if (ex.reason == NodeLostError::Reason::preempted)
        emit(InstancePreempted{n->instance.id, n->index, ex.detail});
    emit(ErrorEvent{fmt::format("node {} lost: {}{}", n->index, ex.detail,
                                restart ? "; starting a replacement" : ""),
                    n->instance.id});
    send(out);
    Completion::deliver(done);
    if (restart) sup_cv_.notify_one();
}

std::exception_ptr PoolCore::no_live_node_locked(Clock::time_point now) const {
    // Names the first node and why it ended; the pool's timeout, when it is the cause.
    const NodeSlot& first = *nodes_.front();
    std::string detail = fmt::format("every node of the pool is lost (node {}: {})", first.index,
                                     first.lost_detail.empty() ? "lost" : first.lost_detail);
    if (now - started_at_ >= spec_.timeout)
        detail += fmt::format("; the pool's timeout of {} s has passed, so none is replaced",
                              spec_.timeout.count());
    return std::make_exception_ptr(
        NodeLostError(first.index, first.instance.id, first.lost_reason, detail));
}

void PoolCore::fail_waiting_if_none_live_locked(std::vector<Completion>& done) {
    if (sched_->any_live()) return;
    const auto now = Clock::now();
    for (auto& t : sched_->drain_waiting())
        done.push_back(Completion::failed(t, no_live_node_locked(now)));
}

void PoolCore::restart_node(int i) {
    auto& n = *nodes_[static_cast<std::size_t>(i)];
    if (n.reader.joinable()) n.reader.join();
    std::string old_id;
    {
        std::lock_guard lk(m_);
        old_id = n.instance.id;
    }
    {
        std::lock_guard lk(n.write_m);
        n.channel.reset();
    }
    try {
        attach(n, backend_->connect(i, [this](Event e) { emit(std::move(e)); }));
    } catch (const std::exception& e) {
        emit(ErrorEvent{fmt::format("node {}: replacement failed: {}", i, e.what()), old_id});
        std::vector<Completion> done;
        {
            std::lock_guard lk(m_);
            if (!closing_) sched_->set_state(i, NodeState::lost);
            n.lost_reason = NodeLostError::Reason::unreachable;
            n.lost_detail = fmt::format("its replacement failed: {}", e.what());
            // Calls pinned to this node while it was being replaced (a broadcast's share) can
            // never run now: they fail instead of waiting forever.
            for (auto& t : sched_->drain_pinned(i))
                done.push_back(
                    Completion::failed(t, std::make_exception_ptr(NodeLostError(
                                              i, old_id, n.lost_reason, n.lost_detail))));
            fail_waiting_if_none_live_locked(done);
        }
        Completion::deliver(done);
        return;
    }
    std::vector<Outgoing> out(nodes_.size());
    {
        std::lock_guard lk(m_);
        if (closing_) return;
        sched_->set_state(i, NodeState::ready);
        n.reader = std::thread([this, p = &n] { reader_loop(p); });
        dispatch_locked(out);
    }
    emit(InstanceReplaced{old_id, n.instance.id, i});
    send(out);
}

void PoolCore::supervisor_loop() {
    const auto hb = std::clamp<std::chrono::seconds>(
        spec_.idle_timeout / 4, std::chrono::seconds(1), std::chrono::seconds(30));
    auto next_hb = Clock::now() + hb;
    const auto silence_bound = 4 * hb + std::chrono::seconds(5);
    const auto cost_interval = std::chrono::seconds(10);
    auto next_cost = Clock::now() + cost_interval;
    std::unique_lock lk(m_);
    while (!stop_supervisor_) {
        auto wake = std::min(next_hb, next_cost);
        if (auto d = sched_->next_deadline()) wake = std::min(wake, *d);
        if (restart_queue_.empty()) sup_cv_.wait_until(lk, wake);
        if (stop_supervisor_) break;
        // Each replacement on a thread of its own: connecting may take many seconds (an
        // unreachable host), and meanwhile deadlines, heartbeats and silent nodes are the
        // supervisor's to watch.
        while (!restart_queue_.empty() && !closing_) {
            int i = restart_queue_.front();
            restart_queue_.pop_front();
            restarters_.emplace_back([this, i] { restart_node(i); });
        }
        auto now = Clock::now();
        std::vector<Completion> done;
        auto expired = sched_->expire(now);
        for (auto& t : expired.tasks) done.push_back(Completion::failed(t, timeout_error(t)));
        bool heartbeat = now >= next_hb;
        if (heartbeat) next_hb = now + hb;
        // A worker answers every heartbeat, even while its calls run: one that stays silent
        // for several of them is frozen or cut off, and its calls must not wait forever.
        std::vector<std::pair<NodeSlot*, std::string>> silent;
        std::vector<NodeSlot*> ready;
        for (auto& n : nodes_) {
            if (heartbeat && sched_->state(n->index) == NodeState::ready) ready.push_back(n.get());
            if (sched_->state(n->index) != NodeState::ready || n->last_heard == 0) continue;
            const auto quiet = now - Clock::time_point(Clock::duration(n->last_heard.load()));
            if (quiet > silence_bound)
                silent.emplace_back(
                    n.get(),
                    fmt::format("the worker answered no heartbeat for {} s",
                                std::chrono::duration_cast<std::chrono::seconds>(quiet).count()));
        }
        std::optional<CostSnapshot> cost_update;
        if (now >= next_cost) {
            next_cost = now + cost_interval;
            auto snap = cost_->snapshot(now);
            if (snap.hourly_rate > 0) cost_update = snap;  // Local and SSH cost nothing
        }
        lk.unlock();
        for (auto& [n, why] : silent) {
            if (n->silent.exchange(true)) continue;  // ended already
            emit(ErrorEvent{fmt::format("node {}: {}; closing its connection", n->index, why),
                            n->instance.id});
            std::lock_guard wl(n->write_m);
            n->silence_reason = why;
            if (n->channel) n->channel->shutdown();
        }
        for (auto [node, id] : expired.cancels)
            send_control(*nodes_[static_cast<std::size_t>(node)], MsgType::cancel, id);
        if (heartbeat)
            for (auto* n : ready) send_control(*n, MsgType::heartbeat, 0);
        Completion::deliver(done);
        if (cost_update)
            emit(CostUpdate{cost_update->elapsed_seconds, cost_update->accumulated_cost,
                            cost_update->hourly_rate, cost_update->spot_count,
                            cost_update->ondemand_count});
        lk.lock();
    }
}

bool PoolCore::cancel_batch(BatchState* b) {
    std::vector<Completion> done;
    Scheduler::Removed removed;
    {
        std::lock_guard lk(m_);
        if (!sched_) return false;
        removed = sched_->cancel(b);
    }
    for (auto& t : removed.tasks)
        done.push_back(Completion::failed(
            t, std::make_exception_ptr(CancelledError("the call was cancelled"))));
    for (auto [node, id] : removed.cancels)
        send_control(*nodes_[static_cast<std::size_t>(node)], MsgType::cancel, id);
    const bool any = !done.empty();
    Completion::deliver(done);
    return any;
}

void PoolCore::close(bool report) {
    // A signal's teardown waits for every close() in progress, whichever thread runs it.
    signals::CloseScope signal_scope(this);
    std::vector<Completion> done;
    {
        std::lock_guard lk(m_);
        if (closed_) return;
        closed_ = true;
        closing_ = true;
        active_ = false;
        stop_supervisor_ = true;
        if (sched_)
            for (auto& t : sched_->drain_all())
                done.push_back(Completion::failed(
                    t, std::make_exception_ptr(CancelledError("the pool was closed"))));
    }
    sup_cv_.notify_all();
    if (backend_) backend_->begin_stop();  // a replacement in progress gives up
    Completion::deliver(done);
    if (bus_) emit(PoolStopping{});
    for (auto& n : nodes_) {
        // The supervisor may be replacing this node right now (restart_node writes the instance
        // under m_ and the channel under write_m): read each under its own lock.
        std::string id;
        {
            std::lock_guard lk(m_);
            id = n->instance.id;
        }
        {
            std::lock_guard lk(n->write_m);
            if (!n->channel) continue;
        }
        if (bus_) emit(InstanceStopping{id});
        send_control(*n, MsgType::shutdown, 0);  // takes write_m and checks the channel again
    }
    if (supervisor_.joinable()) supervisor_.join();
    for (auto& r : restarters_) r.join();  // they give up: begin_stop() and closing_
    if (backend_) backend_->stop_all();
    if (ledger_) ledger_->close();
    for (auto& n : nodes_) {
        {
            std::lock_guard lk(n->write_m);
            if (n->channel) n->channel->shutdown();
        }
        if (n->reader.joinable()) n->reader.join();
    }
    if (bus_) {
        CostSummary c;
        {
            std::lock_guard lk(m_);
            auto end = Clock::now();
            for (auto& n : nodes_)
                if (!n->instance.id.empty()) cost_->stop(n->instance.id, end);
            c = cost_->finish(end);
        }
        emit(CostFinal{c.total_cost, c.total_seconds, c.hourly_rate, c.spot_count, c.ondemand_count,
                       c.savings_vs_ondemand});
        bus_->stop();
    }
    if (report && backend_) {
        std::vector<std::string> left = backend_->leftovers();
        if (!left.empty())
            throw Error(fmt::format(
                "pool {}: could not confirm that these stopped: {}; `sky gc` ends them (the "
                "ledger and their tags name them)",
                id_, fmt::join(left, "; ")));
    }
}

bool PoolCore::active() const noexcept {
    std::lock_guard lk(m_);
    return active_;
}

int PoolCore::instance_count() const noexcept {
    std::lock_guard lk(m_);
    int c = 0;
    for (int i = 0; sched_ && i < sched_->nodes(); ++i)
        if (const auto st = sched_->state(i); st == NodeState::ready || st == NodeState::restarting)
            ++c;
    return active_ ? c : 0;
}

std::vector<Instance> PoolCore::instances() const {
    std::lock_guard lk(m_);
    std::vector<Instance> v;
    if (!sched_) return v;
    for (auto& n : nodes_)
        if (sched_->state(n->index) == NodeState::ready) v.push_back(n->instance);
    return v;
}

double PoolCore::cost() const {
    std::lock_guard lk(m_);
    return cost_ ? cost_->snapshot(Clock::now()).accumulated_cost : 0.0;
}

}  // namespace sky::detail
