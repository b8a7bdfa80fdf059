#include "pool/pool_core.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <future>
#include <map>
#include <tuple>

#include "ledger/ledger.hpp"
#include "metrics/metrics.hpp"
#include "pool/backend_factory.hpp"
#include "pool/exposure.hpp"
#include "pool/lost_call.hpp"
#include "pool/node_hello.hpp"
#include "pool/signals.hpp"
#include "runtime/worker.hpp"
#include "sky/detail/serialize.hpp"
#include "util/random.hpp"

namespace sky::detail {

namespace {
// How many calls may wait in a node's pipe beyond its running slots (Scheduler::dispatch).
constexpr std::size_t max_pipeline_depth = 64;
// Replacement attempts per node, failed ones included (docs/providers.md: "at most 3 times").
constexpr int max_restarts = 3;
constexpr auto cost_interval = std::chrono::seconds(10);
// How often the supervisor looks for silent nodes, whatever else it waits for.
constexpr auto silence_check = std::chrono::seconds(1);
// A dropped connection to a worker that listens for its client is resumed within this bound
// from the drop, or the node is lost (docs/faults.md, "A dropped connection"). A silent node's
// window opens at the heartbeat that went unanswered (at most one heartbeat after the worker's
// last sign of life) and leaves time to ask the backend why (an SSH exec, bounded at 10 s), so
// that a frozen worker or a half-open link is still lost within 30 s in all; idle_timeout
// shortens both (the node's watchdog ends a worker that has not heard from its client for that
// long).
constexpr auto reconnect_bound = std::chrono::seconds(30);
constexpr auto ask_why_bound = std::chrono::seconds(10);
// The worker waits this much longer than the client tries (it may see the drop first).
constexpr auto worker_wait_margin = std::chrono::seconds(10);
// Pauses between reconnect attempts: doubling from the first, at most the last.
constexpr auto reconnect_pause_first = std::chrono::milliseconds(250);
constexpr auto reconnect_pause_max = std::chrono::milliseconds(2000);

std::string what_of(std::exception_ptr e) {
    try {
        std::rethrow_exception(std::move(e));
    } catch (const std::exception& x) {
        return x.what();
    } catch (...) {
        return "unknown error";
    }
}

// A blocking task of this pool runs on this thread (close() does not wait for itself).
thread_local const PoolCore* t_task_of = nullptr;
}  // namespace

PoolCore::PoolCore(PoolSpec spec, std::unique_ptr<Backend> backend)
    : PoolCore(std::move(spec),
               PoolProvider{nullptr,
                            Exposure::open_to_others(fmt::format(
                                "sky cannot tell who reaches the nodes of this pool's own "
                                "backend: {}: make sure only the pool's own machines can",
                                rendezvous_services)),
                            BillingPolicy{}}) {
    backend_ = std::move(backend);
}

PoolCore::PoolCore(PoolSpec spec, PoolProvider provider)
    : spec_(std::move(spec)),
      id_(random_hex(16)),  // 64 bits: ids name destructive teardown by tag (security I2)
      // Heartbeats every few seconds (cheap) and a silence bound well under 30 s, whatever
      // idle_timeout is: a frozen worker or a half-open connection is found silent within
      // heartbeat + bound + a check (14 s by default), which leaves room for asking the backend
      // why (an SSH exec to a cut-off host gives up after 10 s) within the 30 s of api.md. The
      // worker's own idle watchdog keeps idle_timeout; a short idle_timeout tightens both.
      hb_(std::clamp<std::chrono::seconds>(spec_.idle_timeout / 4, std::chrono::seconds(1),
                                           std::chrono::seconds(3))),
      silence_(std::min<std::chrono::seconds>(4 * hb_ + std::chrono::seconds(5),
                                              std::chrono::seconds(10))),
      provider_(std::move(provider)),
      strand_(boost::asio::make_strand(io::executor())),
      timer_(strand_) {}

PoolCore::~PoolCore() {
    try {
        close(false);
    } catch (...) {
    }
}

void PoolCore::run_blocking(std::function<void()> task, std::function<void()> skipped) {
    boost::asio::post(io::blocking(), [self = shared_from_this(), task = std::move(task),
                                       skipped = std::move(skipped)] {
        bool skip = false;
        {
            std::lock_guard lk(self->m_);
            skip = self->closing_;
            if (!skip) ++self->tasks_running_;
        }
        if (skip) {
            if (skipped) skipped();
            return;
        }
        t_task_of = self.get();
        try {
            task();
        } catch (...) {
            // Each task reports its own errors; nothing may escape into the pool's thread.
        }
        t_task_of = nullptr;
        {
            std::lock_guard lk(self->m_);
            --self->tasks_running_;
        }
        self->tasks_cv_.notify_all();
    });
}

std::shared_ptr<NodeSlot> PoolCore::slot_locked(int i) const {
    auto it = std::lower_bound(nodes_.begin(), nodes_.end(), i,
                               [](const auto& n, int index) { return n->index < index; });
    return it != nodes_.end() && (*it)->index == i ? *it : nullptr;
}

std::shared_ptr<NodeSlot> PoolCore::slot(int i) const {
    std::lock_guard lk(m_);
    return slot_locked(i);
}

NodeSlot& PoolCore::add_slot_locked(int i) {
    auto it = std::lower_bound(nodes_.begin(), nodes_.end(), i,
                               [](const auto& n, int index) { return n->index < index; });
    if (it != nodes_.end() && (*it)->index == i) return **it;
    auto n = std::make_shared<NodeSlot>();
    n->index = i;
    return **nodes_.insert(it, std::move(n));
}

std::string PoolCore::instance_id_locked(int i) const {
    const auto n = slot_locked(i);
    return n ? n->instance.id : std::string();
}

// ---- start-up ---------------------------------------------------------------------------------

void PoolCore::start() {
    if (io::on_io_thread())
        throw Error(
            "a sky::ComputePool cannot be started on one of sky's I/O threads (an asynchronous "
            "handler without an executor of its own): use sky::async_start");
    auto started = std::make_shared<std::promise<void>>();
    auto result = started->get_future();
    start_async([started](std::exception_ptr e) {
        if (e)
            started->set_exception(std::move(e));
        else
            started->set_value();
    });
    result.get();
}

void PoolCore::start_async(std::function<void(std::exception_ptr)> done) {
    boost::asio::post(
        io::blocking(), [self = shared_from_this(), done = std::move(done)]() mutable {
            try {
                self->prepare();
            } catch (...) {
                const auto e = std::current_exception();
                self->close(false);
                // Let go before answering: the pool's owner, woken by done(), then holds the last
                // reference and the pool is destroyed on its thread, not on this one after it.
                self.reset();
                done(e);
                return;
            }
            std::vector<int> ids;
            {
                std::lock_guard lk(self->m_);
                for (auto& n : self->nodes_) ids.push_back(n->index);
                self->start_done_ = done;
                self->start_left_ = static_cast<int>(ids.size());
                self->start_errors_.clear();
            }
            // A lazy start: no node to wait for.
            if (ids.empty()) return self->finish_start();
            for (int i : ids)
                self->run_blocking([self, i] { self->start_node(i); },
                                   [self, i] {
                                       self->node_started(
                                           i, std::make_exception_ptr(CancelledError(
                                                  "the pool was closed while it started")));
                                   });
        });
}

void PoolCore::prepare() {
    if (!initialised())
        throw ConfigError(
            "sky::init(argc, argv) was not called: make it the first line of main() so that "
            "worker processes of this program can serve calls");
    // The spec was validated where the pool was made (the composition root, which knows every
    // provider's checks): the engine names no provider.
    bus_ = std::make_unique<EventBus>(spec_.display, spec_.on_event, [this] {
        std::vector<int> running;
        std::lock_guard lk(m_);
        for (int i : sched_ ? sched_->node_ids() : std::vector<int>{})
            running.push_back(static_cast<int>(std::min<std::size_t>(
                sched_->inflight(i), static_cast<std::size_t>(spec_.concurrency))));
        return running;
    });
    started_at_ = Clock::now();
    cost_ = std::make_unique<CostTracker>(started_at_);
    // Written before anything is started: `sky gc` finds what a killed client left.
    ledger_ = Ledger::open(id_, spec_.provider.name(), "");
    if (spec_.budget.max_total_usd > 0 || spec_.budget.max_hourly_usd > 0)
        ledger_->budget(spec_.budget.max_total_usd, spec_.budget.max_hourly_usd);
    if (!backend_) backend_ = provider_.make_backend(BackendContext{spec_, id_, ledger_.get()});
    {
        std::lock_guard lk(m_);
        sched_ = std::make_unique<Scheduler>(spec_.nodes, spec_.concurrency, max_pipeline_depth);
        preempt_ = std::make_unique<PreemptionDesk>(std::max(spec_.nodes, spec_.autoscale.max));
        for (int i = 0; i < spec_.nodes; ++i) add_slot_locked(i).joined_at = started_at_;
        elastic_ = spec_.autoscale.max > 0;
        bounds_ = elastic_ ? ScaleBounds{spec_.autoscale.min, spec_.autoscale.max,
                                         spec_.autoscale.scaledown_window}
                           : ScaleBounds{spec_.nodes, spec_.nodes, Clock::duration::max()};
    }
    // From here (backend and node slots in place, nothing started yet) a SIGINT, SIGTERM or
    // SIGHUP closes this pool before the program ends.
    signals::register_pool(weak_from_this());
    backend_->provision(spec_.nodes, [this](Event e) { emit(std::move(e)); });
    const double price = backend_->node_price();
    std::lock_guard lk(m_);
    price_ = price;
}

void PoolCore::emit(Event e) {
    // A machine is billed from its launch (api.md §4a), not from its worker's handshake.
    if (auto* launched = std::get_if<InstanceProvisioned>(&e)) cost_launched(*launched);
    if (auto* notice = std::get_if<PreemptionNotice>(&e); notice && preempt_) {
        if (auto first = preempt_->notice(std::move(*notice))) bus_->post(std::move(*first));
        return;
    }
    bus_->post(std::move(e));
}

void PoolCore::start_node(int i) {
    try {
        attach(i, backend_->connect(i, [this](Event e) { emit(std::move(e)); }),
               [self = shared_from_this(), i](std::exception_ptr e) {
                   self->node_started(i, std::move(e));
               });
    } catch (...) {
        node_started(i, std::current_exception());
    }
}

void PoolCore::node_started(int i, std::exception_ptr e) {
    {
        std::lock_guard lk(m_);
        start_errors_[i] = std::move(e);
        if (--start_left_ > 0) return;
    }
    finish_start();
}

void PoolCore::finish_start() {
    std::function<void(std::exception_ptr)> done;
    std::exception_ptr error;
    {
        std::lock_guard lk(m_);
        done = std::move(start_done_);
        // The first error in node order, as the nodes are numbered.
        for (auto& [i, e] : start_errors_)
            if (e && !error) error = e;
        if (!error && closing_)
            error = std::make_exception_ptr(CancelledError("the pool was closed while it started"));
    }
    if (error) {
        // Teardown blocks (it waits for the nodes to stop): never on an I/O thread.
        boost::asio::post(io::blocking(), [self = shared_from_this(), error, done]() mutable {
            self->close(false);
            self.reset();  // as in start_async: the owner holds the last reference
            done(error);
        });
        return;
    }
    send_layout();
    std::vector<std::pair<int, std::pair<std::string, bool>>> ended;
    std::uint64_t generation = 0;
    {
        std::lock_guard lk(m_);
        active_ = true;
        const auto now = Clock::now();
        for (auto& n : nodes_) {
            n->idle_since = now;  // the constructor's nodes count in the reap budget
            price_ = std::max(price_, n->instance.hourly_price);
            sched_->set_state(n->index, NodeState::ready);
            if (auto early = n->life.started())
                ended.emplace_back(n->index, std::pair{early->why, early->protocol_error});
        }
        next_hb_ = Clock::now() + hb_;
        next_cost_ = Clock::now() + cost_interval;
    }
    // A connection that ended while the others still started is a lost node now.
    for (auto& [i, why] : ended) {
        {
            std::lock_guard lk(m_);
            if (auto n = slot_locked(i)) generation = n->generation;
        }
        run_blocking([self = shared_from_this(), i, generation, why] {
            self->node_ended(i, generation, why.first, why.second);
        });
    }
    boost::asio::post(strand_, [self = shared_from_this()] { self->arm_timer(); });
    emit(PoolStarted{id_, spec_.nodes});
    done(nullptr);
}

// ---- a node's connection ----------------------------------------------------------------------

void PoolCore::cost_started(const Instance& i) {
    std::lock_guard lk(m_);
    // A worker restarted on the machine it was lost on (SSH, Local: the same instance id) runs
    // on a machine whose bill never stopped.
    if (cost_->known(i.id)) return cost_->resume(i.id);
    // Instance carries the rate it runs at; on-demand instances are their own baseline.
    cost_->start(i.id, provider_.billing, i.spot, i.hourly_price,
                 i.spot ? i.on_demand_price : i.hourly_price, Clock::now());
}

void PoolCore::cost_launched(const InstanceProvisioned& p) {
    // Without its price the instance is billed from its handshake (cost_started) as before.
    if (p.instance_id.empty() || !p.price_on_demand) return;
    std::lock_guard lk(m_);
    if (!cost_ || cost_->known(p.instance_id)) return;
    const double rate = p.spot && p.price_spot ? *p.price_spot : *p.price_on_demand;
    cost_->start(p.instance_id, provider_.billing, p.spot, rate, *p.price_on_demand, Clock::now());
    // A joining node is named by its machine from now: if its bootstrap fails, its end (and
    // its cost) is that machine's.
    if (auto n = slot_locked(p.node); n && n->joining && n->instance.id.empty())
        n->instance.id = p.instance_id;
}

void PoolCore::attach(int i, NodeStart s, std::function<void(std::exception_ptr)> done,
                      std::optional<std::chrono::seconds> resume_within) {
    const auto slot_of_i = slot(i);
    if (!slot_of_i) throw Error(fmt::format("node {} is not part of the pool", i));
    auto& n = *slot_of_i;
    const Instance instance = s.instance;
    const bool resume = resume_within.has_value();
    const bool resumable = resume || backend_->can_reconnect(i);
    auto conn = std::make_shared<NodeConnection>(std::move(s.stream),
                                                 fmt::format("node {} ({})", i, instance.id));
    std::uint64_t generation = 0;
    std::string session;
    {
        std::lock_guard lk(m_);
        n.instance = instance;
        // A signal's teardown may run close() while the node starts.
        if (closing_) {
            conn->close();
            throw CancelledError("the pool was closed while it started");
        }
        n.conn = conn;
        // Counted pool-wide: a node that leaves and another that takes its index later never
        // share a generation, so a late event of the first is dropped.
        generation = n.generation = ++generations_;
        if (!resume) {
            // A fresh worker: a session of its own.
            n.token = s.token;
            n.seal = s.seal;
            n.session = random_hex(16);
            n.resumable = resumable;
        }
        session = n.session;
    }
    if (!resume) cost_started(instance);
    ClientChannel::Handshake h;
    h.token = s.token;
    h.seal = s.seal;
    // A worker answers in well under a second. One silent for as long as a node may go without
    // its client (idle_timeout) is treated as gone, within [5 s, 60 s]; a resumed one within
    // what is left of its reconnect window.
    h.hello_bound =
        resume ? *resume_within
               : std::clamp<std::chrono::seconds>(spec_.idle_timeout, std::chrono::seconds(5),
                                                  std::chrono::seconds(60));
    if (resume) h.ready_bound = *resume_within;
    h.on_log = [this, i, id = instance.id](LogMsg m) {
        emit(LogLine{i, id, std::move(m.line), m.timestamp});
    };
    // 0: a worker that cannot be reached again does not wait for its client after a drop.
    h.hello = node_hello(
        spec_, NodeHelloFacts{.pool_id = id_,
                              .node = i,
                              .instance = instance,
                              .head_addr = backend_->head_address(),
                              .session = session,
                              .resume = resume,
                              .reconnect_wait = resumable ? reconnect_bound + worker_wait_margin
                                                          : std::chrono::seconds(0),
                              .env = &s.env});
    std::weak_ptr<PoolCore> weak = weak_from_this();
    conn->start(
        std::move(h),
        [weak, i, generation, resume, done = std::move(done)](std::exception_ptr e,
                                                              WorkerReady ready) {
            auto self = weak.lock();
            if (!self) return;
            if (!e) e = self->on_ready(i, generation, ready, resume);
            done(std::move(e));
        },
        [weak, i, generation, id = instance.id](std::vector<Incoming>& frames) {
            if (auto self = weak.lock()) self->on_frames(i, generation, id, frames);
        },
        [weak, i, generation](const std::string& why, bool protocol_error) {
            if (auto self = weak.lock()) self->on_ended(i, generation, why, protocol_error);
        });
}

std::exception_ptr PoolCore::on_ready(int i, std::uint64_t generation, const WorkerReady& ready,
                                      bool resumed) {
    const auto slot_of_i = slot(i);
    if (!slot_of_i) return std::make_exception_ptr(Error(fmt::format("node {} left the pool", i)));
    auto& n = *slot_of_i;
    bool running = false;
    std::shared_ptr<NodeConnection> conn;
    {
        std::lock_guard lk(m_);
        if (closing_)
            return std::make_exception_ptr(CancelledError("the pool was closed while it started"));
        if (generation != n.generation)
            return std::make_exception_ptr(Error(fmt::format(
                "node {}: a newer connection took this one's place during its handshake", i)));
        sched_->set_workers(i, ready.workers);
        workers_per_node_ = std::max(workers_per_node_, ready.workers);
        n.ports = ready.ports;
        running = active_ && !resumed;  // a resumed worker keeps its layout
        conn = n.conn;
    }
    // The notice that stands, and every one after (api.md §10a).
    if (conn) preempt_->joined(i, conn);
    if (running) send_layout(i);  // a replacement: every node learns its new ports
    return nullptr;
}

PoolLayout PoolCore::layout_locked() const {
    // The world's nodes once a distributed call froze it, else every node that stays: indexes
    // may have gaps, so each position names its node.
    std::vector<int> which = world_;
    if (which.empty())
        for (const auto& x : nodes_)
            if (!x->leaving) which.push_back(x->index);
    PoolLayout l;
    for (const int i : which) {
        const auto x = slot_locked(i);
        std::string addr =
            x ? x->instance.private_ip.value_or(x->instance.public_ip.value_or("")) : "";
        if (addr.empty() && i == 0) addr = backend_->head_address();
        const int workers = sched_->has_node(i) ? sched_->workers(i) : 1;
        auto ports = x ? x->ports : std::vector<std::int32_t>{};
        ports.resize(static_cast<std::size_t>(workers), 0);
        l.peers.push_back(std::move(addr));
        l.workers.push_back(workers);
        l.ports.push_back(std::move(ports));
        l.nodes.push_back(i);
    }
    return l;
}

void PoolCore::send_layout(int joining) {
    auto payload = std::make_shared<Buffer>();
    std::lock_guard lk(m_);
    save_to(*payload, layout_locked());
    // Written under the lock (a write only queues): a layout made before another one is never
    // written after it.
    for (auto& x : nodes_)
        if ((joining < 0 || x->index == joining ||
             (sched_->has_node(x->index) && sched_->state(x->index) == NodeState::ready)) &&
            x->conn)
            x->conn->write_frame(MsgType::layout, payload);
}

void PoolCore::send_world_layout_locked() {
    auto payload = std::make_shared<Buffer>();
    save_to(*payload, layout_locked());
    // Written under the lock, before any of the world's calls is dispatched: a node reads the
    // world it ranks in before its first call of it, whichever thread dispatches that call.
    for (auto& x : nodes_)
        if (x->conn && sched_->has_node(x->index) && sched_->state(x->index) == NodeState::ready)
            x->conn->write_frame(MsgType::layout, payload);
}

void PoolCore::on_frames(int i, std::uint64_t generation, const std::string& instance_id,
                         std::vector<Incoming>& frames) {
    const auto slot_of_i = slot(i);
    if (!slot_of_i) return;
    auto& n = *slot_of_i;
    // Events first (outside the lock), then results, errors and call output under one lock.
    bool calls = false;
    for (auto& in : frames) {
        switch (in.type) {
            case MsgType::result:
            case MsgType::error:
            case MsgType::started:
                calls = true;
                break;
            case MsgType::log:
                emit(LogLine{i, instance_id, in.log.line, in.log.timestamp});
                calls = calls || in.call_id != 0;
                break;
            case MsgType::metrics: {
                Metrics m = in.metrics;
                m.instance_id = instance_id;
                m.node = i;
                emit(m);
                break;
            }
            case MsgType::heartbeat:
                // The one after a resumed worker's kept answers ends its resync.
                calls = true;
                break;
            case MsgType::progress:
                preempt_->progress(i, in.progress);
                break;
            case MsgType::notice:
                // The node learned of it itself (its launcher's probe, a batch system's
                // signal): the same desk as a notice a backend hands to emit().
                if (in.notice) {
                    PreemptionNotice p;
                    p.node = i;
                    p.instance_id = instance_id;
                    p.deadline = in.notice->deadline;
                    p.reason = in.notice->reason;
                    emit(std::move(p));
                }
                break;
            default:
                break;
        }
    }
    if (!calls) return;
    Sends sends;
    std::vector<Completion> done;
    std::vector<std::uint64_t> confirms;  // at-most-once calls the client now counts as started
    std::vector<std::uint64_t> acks;      // answers received, which a resumable worker keeps
    std::shared_ptr<NodeConnection> conn;
    std::optional<Resynced> resynced;
    std::size_t resent = 0;
    Scale scale;
    {
        std::lock_guard lk(m_);
        if (generation != n.generation || closing_) return;
        const auto now = Clock::now();
        for (auto& r : frames) {
            if (r.type == MsgType::heartbeat) {
                if (n.life.is<life::Resyncing>()) {
                    resent = sched_->inflight(i);
                    resynced = resync_locked(n, now, sends);
                }
                continue;
            }
            if (r.type == MsgType::started) {
                // Marked started before the worker may run it: only then is it confirmed.
                const Task* t = sched_->mark_started(i, r.call_id);
                if (t && t->call.options.at_most_once) confirms.push_back(r.call_id);
                continue;
            }
            if (r.type == MsgType::log) {
                if (r.call_id == 0) continue;
                if (auto* tail = sched_->log_tail(i, r.call_id)) {
                    tail->push_back(std::move(r.log.line));
                    if (tail->size() > 20) tail->erase(tail->begin());
                }
                continue;
            }
            if (r.type != MsgType::result && r.type != MsgType::error) continue;
            // Every answer is acknowledged, also one sent again after a resume (ignored here).
            if (n.resumable) acks.push_back(r.call_id);
            auto t = sched_->take(i, r.call_id);
            n.life.resumed_answer(t.has_value());
            if (!t) continue;  // timed out or cancelled already
            // A result after the call's deadline (the timer had not got to it yet) did not
            // finish in time: the call fails as its .timeout() says.
            if (t->late(now))
                done.push_back(Completion::failed(*t, timeout_error(*t)));
            else if (r.type == MsgType::result)
                done.push_back({std::move(t->batch), t->index, std::move(r.payload), nullptr, i,
                                n.instance.id, std::move(t->log_tail)});
            else
                done.push_back(Completion::failed(*t, error_from(n, *t, std::move(r.error))));
        }
        if (!confirms.empty() || !acks.empty()) conn = n.conn;
        dispatch_locked(sends);
        touch_locked(n, now, scale);
    }
    act(scale);
    if (conn) {
        for (auto id : confirms) conn->write_control(MsgType::confirm, id);
        conn->ack(acks);
    }
    if (resynced)
        emit(ErrorEvent{
            fmt::format("node {}: reconnected to its worker after {:.1f} s; {} kept answer(s) "
                        "received ({} of them had arrived before the drop); {} call(s) still "
                        "unanswered sent again (the worker runs each once)",
                        i, std::chrono::duration<double>(resynced->away).count(),
                        resynced->resumed_answers, resynced->resumed_again, resent),
            instance_id});
    send(sends);
    Completion::deliver(done);
}

void PoolCore::on_ended(int i, std::uint64_t generation, const std::string& why,
                        bool protocol_error) {
    std::string notice, instance_id;
    {
        std::lock_guard lk(m_);
        const auto slot_of_i = slot_locked(i);
        if (!slot_of_i) return;
        auto& n = *slot_of_i;
        instance_id = n.instance.id;
        if (closing_ || generation != n.generation) return;
        if (!active_) {
            n.life.ended_while_starting(why, protocol_error);
            return;
        }
        // A worker that breaks the protocol is not talked to again; one that listens for its
        // client gets its connection back within the window, its calls kept.
        const auto now = Clock::now();
        if (!protocol_error && n.resumable && start_reconnect_locked(n, why, now))
            notice = fmt::format(
                "node {}: the connection to its worker dropped ({}); reconnecting for up to "
                "{:.0f} s, its {} call(s) kept",
                i, n.life.window()->drop_reason,
                std::chrono::duration<double>(n.life.window()->deadline - now).count(),
                sched_->inflight(i));
    }
    if (!notice.empty()) {
        emit(ErrorEvent{notice, instance_id});
        run_blocking([self = shared_from_this(), i] { self->reconnect_attempt(i); });
        return;
    }
    // Asking the backend why (a process's exit status, a cloud's describe) may block.
    run_blocking([self = shared_from_this(), i, generation, why, protocol_error] {
        self->node_ended(i, generation, why, protocol_error);
    });
}

// ---- calls ------------------------------------------------------------------------------------

std::shared_ptr<BatchState> PoolCore::submit(const std::vector<const CallDesc*>& calls,
                                             bool broadcast) {
    // A broadcast with a distributed plugin runs once per rank: W calls on each node.
    const bool per_rank =
        broadcast && !calls.empty() && calls[0]->options.plugin.kind != PluginSpec::none;
    // What the framework's unauthenticated rendezvous exposes here, said once per pool.
    if (!calls.empty() && calls[0]->options.plugin.kind != PluginSpec::none &&
        !exposure_noticed_.exchange(true))
        notice_distributed_exposure(provider_.exposure, [this](Event e) { emit(std::move(e)); });
    // On an elastic pool with no world to run on yet, it wakes one (pool/elastic.cpp).
    if (per_rank && calls.size() == 1)
        if (auto woken = submit_to_waking_world(*calls[0])) return woken;
    std::shared_ptr<BatchState> batch;
    Sends sends;
    std::vector<Completion> done;
    Scale scale;
    {
        std::lock_guard lk(m_);
        // A distributed call freezes the world: the nodes ready at the first one.
        if (per_rank && sched_ && world_.empty() && active_) {
            world_ = sched_->broadcast_nodes();
            // The nodes learn that world (its nodes, ranked by position) before its first call.
            if (!world_.empty()) send_world_layout_locked();
        }
        // A plain broadcast on an elastic pool with no node ready first wakes max(min, 1).
        std::vector<int> wake;
        if (broadcast && !per_rank && sched_ && active_ && !closing_ && elastic_ &&
            !budget_stopped_ && sched_->broadcast_nodes().empty()) {
            const int count = std::max(bounds_.min, 1);
            const auto now = Clock::now();
            for (int i = 0; static_cast<int>(wake.size()) < count; ++i)
                if (!slot_locked(i) && !sched_->has_node(i)) {
                    auto& slot = add_slot_locked(i);
                    slot.joined_at = now;
                    slot.idle_since = now;
                    slot.joining = true;
                    ++joining_;
                    sched_->add_node_at(i);
                    wake.push_back(i);
                }
            scale.events.push_back(PoolScaled{
                0, count, fmt::format("a broadcast on an empty pool wakes {} node(s)", count)});
            scale.start = wake;
        }
        const std::vector<int>& on = per_rank ? world_ : wake;
        const std::size_t n = !broadcast ? calls.size()
                              : sched_   ? sched_->broadcast_size(per_rank, on)
                                         : static_cast<std::size_t>(spec_.nodes);
        batch = std::make_shared<BatchState>(n);
        // A Future may outlive its pool: cancelling then finds nothing to cancel.
        batch->cancel = [core = weak_from_this(), raw = batch.get()] {
            auto c = core.lock();
            return c ? c->cancel_batch(raw) : false;
        };
        if (n == 0) {
            if (per_rank && active_ && !closing_ && calls.size() == 1) {
                // No world to run on: a distributed call needs its nodes ready.
                batch = std::make_shared<BatchState>(1);
                batch->fail(0, std::make_exception_ptr(ConfigError(
                                   "a distributed call on a fixed pool with no ready node: it "
                                   "has no world to run on (pool.resize(n).get() first)")));
            }
            return batch;
        }
        const auto now = Clock::now();
        if (closing_ || !active_) {
            for (std::size_t i = 0; i < n; ++i)
                done.push_back(
                    {batch, i, {}, std::make_exception_ptr(Error("the pool is closed"))});
        } else if (budget_stopped_) {
            for (std::size_t i = 0; i < n; ++i) done.push_back({batch, i, {}, budget_error_});
        } else if (broadcast) {
            for (auto [item, node] : sched_->broadcast(batch, *calls[0], per_rank, now, on))
                done.push_back(
                    {batch,
                     item,
                     {},
                     std::make_exception_ptr(NodeLostError(
                         node, instance_id_locked(node), NodeLostError::Reason::unreachable,
                         "the node was lost earlier and could not be replaced"))});
        } else if (!serving_locked()) {
            // Every node is gone for good (lost, past the pool's timeout, not replaceable):
            // waiting could only be forever.
            for (std::size_t i = 0; i < n; ++i)
                done.push_back({batch, i, {}, no_live_node_locked(now)});
        } else {
            for (std::size_t i = 0; i < n; ++i)
                sched_->enqueue(sched_->make_task(batch, i, *calls[i], -1, now));
        }
        if (sched_) {  // none before start()
            dispatch_locked(sends);
            timer_sooner_locked();
            if (active_ && !closing_) rescale_locked(now, scale);
        }
    }
    send(sends);
    Completion::deliver(done);
    act(scale);
    return batch;
}

void PoolCore::dispatch_locked(Sends& sends) {
    // By node, in the order first assigned (a pool has few nodes: a search beats a map's node
    // allocations on every result's dispatch).
    std::vector<std::pair<int, Outgoing>> out;
    sched_->dispatch([&](int node, std::uint64_t call_id, const Task& t) {
        auto it =
            std::find_if(out.begin(), out.end(), [&](const auto& p) { return p.first == node; });
        if (it == out.end()) it = out.insert(out.end(), {node, Outgoing{}});
        auto& o = it->second;
        // The answers received so far travel with the calls: no write of their own.
        if (o.empty())
            if (auto n = slot_locked(node); n && n->conn) n->conn->take_acks(o.small);
        encode_call(o, call_id, t.call, t.pinned_worker);
    });
    std::sort(out.begin(), out.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (auto& [i, o] : out)
        if (auto n = slot_locked(i); !o.empty() && n && n->conn) {
            n->busy = true;
            sends.emplace_back(n->conn, std::move(o));
        }
}

void PoolCore::send(Sends& sends) {
    for (auto& [conn, out] : sends) conn->write(std::move(out));
    sends.clear();
}

std::exception_ptr PoolCore::error_from(const NodeSlot& n, const Task& t, ErrorMsg e) {
    if (e.kind == ErrorMsg::cancelled)
        return std::make_exception_ptr(
            CancelledError(fmt::format("{} was cancelled before it started", t.call.function)));
    if (e.log_tail.empty()) e.log_tail = t.log_tail;
    return std::make_exception_ptr(RemoteError(std::string(t.call.function), n.index, n.instance.id,
                                               e.type_name, e.message, std::move(e.log_tail)));
}

bool PoolCore::cancel_batch(BatchState* b) {
    std::vector<Completion> done;
    Scheduler::Removed removed;
    std::vector<std::pair<std::shared_ptr<NodeConnection>, std::uint64_t>> cancels;
    std::shared_ptr<BatchState> waking;  // a distributed call whose world is being woken
    {
        std::lock_guard lk(m_);
        if (!sched_) return false;
        for (auto it = world_calls_.begin(); it != world_calls_.end(); ++it)
            if (it->batch.get() == b) {
                waking = it->batch;
                world_calls_.erase(it);
                break;
            }
        removed = sched_->cancel(b);
        for (auto [node, id] : removed.cancels)
            if (auto n = slot_locked(node); n && n->conn && sched_->state(node) == NodeState::ready)
                cancels.emplace_back(n->conn, id);
    }
    for (auto& t : removed.tasks)
        done.push_back(Completion::failed(
            t, std::make_exception_ptr(CancelledError("the call was cancelled"))));
    for (auto& [conn, id] : cancels) conn->write_control(MsgType::cancel, id);
    const bool any = !done.empty() || waking;
    Completion::deliver(done);
    if (waking) waking->fail(0, std::make_exception_ptr(CancelledError("the call was cancelled")));
    return any;
}

std::exception_ptr PoolCore::no_live_node_locked(Clock::time_point now) const {
    // Names the first node and why it ended; the pool's timeout, when it is the cause.
    if (nodes_.empty())
        return std::make_exception_ptr(Error("the pool has no node: none was started"));
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
    if (serving_locked()) return;
    const auto now = Clock::now();
    for (auto& t : sched_->drain_waiting())
        done.push_back(Completion::failed(t, no_live_node_locked(now)));
}

// ---- a dropped connection ---------------------------------------------------------------------

bool PoolCore::start_reconnect_locked(NodeSlot& n, const std::string& why, Clock::time_point now) {
    // A silent node's window opens at the heartbeat that went unanswered, and leaves time to
    // ask the backend why; idle_timeout shortens both.
    const WindowRule rule{
        std::min<Clock::duration>(reconnect_bound, spec_.idle_timeout),
        std::min<Clock::duration>(reconnect_bound - hb_ - ask_why_bound, spec_.idle_timeout)};
    if (!n.life.dropped(why, now, rule)) return false;
    n.conn.reset();
    sched_->set_state(n.index, NodeState::restarting);  // no calls for it meanwhile
    return true;
}

void PoolCore::reconnect_attempt(int i) {
    const auto slot_of_i = slot(i);
    if (!slot_of_i) return;
    auto& n = *slot_of_i;
    NodeStart s;
    Clock::time_point deadline;
    std::string last_error;
    {
        std::lock_guard lk(m_);
        if (closing_) return;
        const ReconnectWindow* w = n.life.attempt();
        if (!w) return;
        deadline = w->deadline;
        last_error = w->resume_error;
        s.instance = n.instance;
        s.token = n.token;
        s.seal = n.seal;
    }
    const auto left = deadline - Clock::now();
    if (left <= Clock::duration::zero())
        return give_up_reconnect(
            i, last_error.empty() ? "the window closed before the attempt" : last_error, false);
    try {
        s.stream =
            backend_->reconnect(i, std::chrono::duration_cast<std::chrono::milliseconds>(left));
    } catch (const WorkerGone& e) {
        return give_up_reconnect(i, e.what(), true);
    } catch (const std::exception& e) {
        return retry_reconnect(i, e.what());
    }
    // The handshake waits for the worker no longer than the window lasts.
    const auto within = std::max<std::chrono::seconds>(
        std::chrono::seconds(1), std::chrono::ceil<std::chrono::seconds>(deadline - Clock::now()));
    try {
        attach(
            i, std::move(s),
            [self = shared_from_this(), i](std::exception_ptr e) {
                if (e) return self->retry_reconnect(i, what_of(e));
                std::shared_ptr<NodeConnection> conn;
                {
                    std::lock_guard lk(self->m_);
                    auto n = self->slot_locked(i);
                    if (self->closing_ || !n || !n->life.resumed()) return;
                    conn = n->conn;
                }
                // The worker sent "started" for its running calls and every answer it kept
                // before it reads this: its answer marks the end of what it had.
                if (conn) conn->heartbeat();
            },
            within);
    } catch (const std::exception&) {
        // The pool is closing.
    }
}

void PoolCore::retry_reconnect(int i, const std::string& why) {
    const auto slot_of_i = slot(i);
    if (!slot_of_i) return;
    auto& n = *slot_of_i;
    Clock::time_point at;
    {
        std::lock_guard lk(m_);
        if (closing_) return;
        const ReconnectWindow* w = n.life.attempt_failed(why);
        if (!w) return;
        n.conn.reset();
        const auto now = Clock::now();
        if (now < w->deadline) {
            const int k = std::min(w->attempts - 1, 3);
            const auto pause = std::min<Clock::duration>(
                reconnect_pause_first * (1 << std::max(k, 0)), reconnect_pause_max);
            at = std::min(now + pause, w->deadline);
        }
    }
    if (at == Clock::time_point{}) {
        run_blocking(
            [self = shared_from_this(), i, why] { self->give_up_reconnect(i, why, false); });
        return;
    }
    auto timer = std::make_shared<boost::asio::steady_timer>(strand_, at);
    timer->async_wait([weak = weak_from_this(), timer, i](boost::system::error_code ec) {
        auto self = weak.lock();
        if (ec || !self) return;
        self->run_blocking([self, i] { self->reconnect_attempt(i); });
    });
}

void PoolCore::give_up_reconnect(int i, const std::string& why, bool worker_gone) {
    const auto slot_of_i = slot(i);
    if (!slot_of_i) return;
    auto& n = *slot_of_i;
    std::uint64_t generation = 0;
    {
        std::lock_guard lk(m_);
        if (closing_ || !n.life.window()) return;
        generation = n.generation;
        // The node's loss says the reason this gives, unless the backend knows better (a
        // crash, a reclaim).
        n.life.give_up(why, worker_gone, Clock::now());
    }
    node_ended(i, generation, why, false);
}

std::optional<Resynced> PoolCore::resync_locked(NodeSlot& n, Clock::time_point now, Sends& sends) {
    auto done = n.life.caught_up(now);
    if (!done) return done;
    // What is still in flight was never received, or still runs there: sent again, the worker
    // runs a call id once (a running or queued one is not run again).
    Outgoing out;
    n.conn->take_acks(out.small);
    for (const Task* t : sched_->inflight_tasks(n.index))
        encode_call(out, t->call_id, t->call, t->pinned_worker);
    if (!out.empty()) sends.emplace_back(n.conn, std::move(out));
    // A draining node that reconnected still takes no new call.
    sched_->set_state(n.index, n.leaving ? NodeState::draining : NodeState::ready);
    return done;
}

// ---- loss and replacement ---------------------------------------------------------------------

bool PoolCore::may_restart_locked(int i) const {
    const auto n = slot_locked(i);
    return !closing_ && n && backend_->can_restart(i) && n->restarts < max_restarts &&
           Clock::now() - started_at_ < spec_.timeout;
}

void PoolCore::node_ended(int i, std::uint64_t generation, const std::string& why,
                          bool protocol_error) {
    const auto slot_of_i = slot(i);
    if (!slot_of_i) return;
    auto& n = *slot_of_i;
    std::string instance_id, silence;
    {
        std::lock_guard lk(m_);
        if (closing_ || generation != n.generation) return;
        instance_id = n.instance.id;
        silence = n.life.ended_reason();
    }
    NodeExit ex;
    if (protocol_error) {
        ex = {NodeLostError::Reason::unreachable, why};
        emit(ErrorEvent{fmt::format("node {}: protocol error, closing its connection: {}", i, why),
                        instance_id});
    } else {
        ex = backend_->exit_reason(i);
        // The supervisor ended a silent node: that, not the closed connection, is the reason.
        if (!silence.empty() && ex.reason == NodeLostError::Reason::unreachable)
            ex.detail = silence;
    }
    Sends sends;
    std::vector<Completion> done;
    bool restart = false;
    bool drop = false;
    Scale scale;
    {
        std::lock_guard lk(m_);
        if (closing_ || generation != n.generation) {
            if (closing_) sched_->set_state(i, NodeState::closed);
            return;
        }
        n.conn.reset();
        n.life.lose();
        n.lost_reason = ex.reason;
        n.lost_detail = ex.detail;
        cost_->stop(n.instance.id, Clock::now());
        // A node that was leaving is not replaced; on an elastic pool, a lost node outside the
        // frozen world is replaced only when the pool would fall below max(min, target).
        const bool in_world = std::find(world_.begin(), world_.end(), i) != world_.end();
        if (n.leaving) {
            drop = true;
        } else if (elastic_ && !in_world) {
            int others = 0;
            for (auto& x : nodes_)
                if (x->index != i && !x->leaving) ++others;
            drop = others >= std::max(bounds_.min, scale_target(scale_input_locked()));
        }
        if (!drop && may_restart_locked(i) && hourly_allows_locked(1, Clock::now()) > 0) {
            ++n.restarts;
            restart = true;
            n.life.replace();
        } else if (!drop && !may_restart_locked(i) && elastic_ && !in_world) {
            drop = true;  // its index is free again: the decision starts a fresh node
        } else if (!drop && may_restart_locked(i)) {
            scale.events.push_back(ErrorEvent{
                fmt::format("node {}: not replaced: its ${:.3f}/h would pass the budget's "
                            "max_hourly_usd of ${:.3f}/h",
                            i, std::max(price_, n.instance.hourly_price),
                            spec_.budget.max_hourly_usd),
                n.instance.id});
        }
        // A world still being woken that lost a node for good never forms: its calls fail.
        if (world_forming_ && in_world && !restart) {
            fail_world_calls_locked(
                std::make_exception_ptr(NodeLostError(
                    i, n.instance.id, ex.reason,
                    "a node of the world a distributed call woke was lost: " + ex.detail)),
                scale);
            world_.clear();
            world_forming_ = false;
        }
        // Calls with retries left wait for another node (or the replacement); the rest fail.
        // A crash report names the calls that were running: they had started.
        mark_crash_started(*sched_, i, ex);
        for (auto& t : sched_->node_lost(i, restart ? NodeState::restarting : NodeState::lost))
            done.push_back(Completion::failed(t, lost_call_error(i, n.instance.id, ex, t)));
        if (drop) {
            n.leaving = true;
            n.ending = true;
            scale.end.push_back(i);
        }
        dispatch_locked(sends);
        fail_waiting_if_none_live_locked(done);
    }
    act(scale);
    if (!restart) preempt_->node_gone(i);
    if (ex.reason == NodeLostError::Reason::preempted)
        emit(InstancePreempted{instance_id, i, ex.detail});
    emit(ErrorEvent{
        fmt::format("node {} lost: {}{}", i, ex.detail, restart ? "; starting a replacement" : ""),
        instance_id});
    send(sends);
    Completion::deliver(done);
    // Connecting may take many seconds (an unreachable host): this task is on the blocking
    // pool, and meanwhile deadlines, heartbeats and silent nodes are the timer's to watch.
    if (restart) replace(i, instance_id);
}

void PoolCore::replace(int i, const std::string& old_id) {
    try {
        attach(i, backend_->connect(i, [this](Event e) { emit(std::move(e)); }),
               [self = shared_from_this(), i, old_id](std::exception_ptr e) {
                   if (!e) return self->replacement_ready(i, old_id);
                   try {
                       std::rethrow_exception(e);
                   } catch (const std::exception& x) {
                       self->replacement_failed(i, old_id, x.what());
                   }
               });
    } catch (const std::exception& e) {
        replacement_failed(i, old_id, e.what());
    }
}

void PoolCore::replacement_failed(int i, const std::string& old_id, const std::string& why) {
    const auto slot_of_i = slot(i);
    if (!slot_of_i) return;
    auto& n = *slot_of_i;
    std::vector<Completion> done;
    bool retry = false;
    int attempt = 0;
    {
        std::lock_guard lk(m_);
        if (closing_) return;
        n.conn.reset();
        attempt = n.restarts;
        if (may_restart_locked(i)) {
            ++n.restarts;
            retry = true;
        } else {
            sched_->set_state(i, NodeState::lost);
            n.life.lose();
            n.lost_reason = NodeLostError::Reason::unreachable;
            n.lost_detail = fmt::format("its replacement failed: {}", why);
            // Calls pinned to this node while it was being replaced (a broadcast's share) can
            // never run now: they fail instead of waiting forever.
            for (auto& t : sched_->drain_pinned(i))
                done.push_back(
                    Completion::failed(t, std::make_exception_ptr(NodeLostError(
                                              i, old_id, n.lost_reason, n.lost_detail))));
            fail_waiting_if_none_live_locked(done);
        }
    }
    if (!retry) preempt_->node_gone(i);
    emit(ErrorEvent{fmt::format("node {}: replacement failed (attempt {} of {}): {}{}", i, attempt,
                                max_restarts, why, retry ? "; trying again" : ""),
                    old_id});
    Completion::deliver(done);
    if (retry) run_blocking([self = shared_from_this(), i, old_id] { self->replace(i, old_id); });
}

void PoolCore::replacement_ready(int i, const std::string& old_id) {
    std::string new_id;
    Sends sends;
    {
        std::lock_guard lk(m_);
        if (closing_) return;
        const auto n = slot_locked(i);
        if (!n) return;
        sched_->set_state(i, NodeState::ready);
        n->life.replaced();
        new_id = n->instance.id;
        dispatch_locked(sends);
    }
    preempt_->node_replaced(i);
    emit(InstanceReplaced{old_id, new_id, i});
    send(sends);
}

// ---- the supervisor's timer -------------------------------------------------------------------

void PoolCore::arm_timer() {
    Clock::time_point at;
    {
        std::lock_guard lk(m_);
        if (closing_) return;
        at = std::min({next_hb_, next_cost_, next_budget_, Clock::now() + silence_check});
        if (auto d = sched_->next_deadline()) at = std::min(at, *d);
        timer_at_ = at;
    }
    timer_.expires_at(at);  // a wait in progress ends with operation_aborted
    timer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
        if (ec) return;
        if (auto self = weak.lock()) self->tick();
    });
}

void PoolCore::timer_sooner_locked() {
    const auto d = sched_->next_deadline();
    if (!active_ || !d || *d >= timer_at_) return;
    timer_at_ = *d;
    boost::asio::post(strand_, [weak = weak_from_this()] {
        if (auto self = weak.lock()) self->arm_timer();
    });
}

void PoolCore::tick() {
    const auto now = Clock::now();
    std::vector<Completion> done;
    std::vector<std::pair<std::shared_ptr<NodeConnection>, std::uint64_t>> cancels;
    std::vector<std::shared_ptr<NodeConnection>> heartbeats, acks;
    std::vector<std::tuple<std::shared_ptr<NodeConnection>, int, std::string, std::string>> silent;
    std::optional<CostSnapshot> cost_update;
    std::optional<double> ledger_spent;  // for `sky ls`: at most one record per cost_interval
    Scale scale;
    {
        std::lock_guard lk(m_);
        if (closing_) return;
        auto expired = sched_->expire(now);
        for (auto& t : expired.tasks) {
            // A call that never reached a node (an elastic pool waking, every node busy) says
            // so: its .timeout() counts from submission.
            const bool sent = std::any_of(expired.cancels.begin(), expired.cancels.end(),
                                          [&](const auto& c) { return c.second == t.call_id; });
            done.push_back(Completion::failed(
                t, sent ? timeout_error(t)
                        : std::make_exception_ptr(TimeoutError(fmt::format(
                              "{} did not finish within {} ms: it was still waiting for a node",
                              t.call.function,
                              t.call.options.timeout ? t.call.options.timeout->count() : 0)))));
        }
        // A connection being resumed is in its handshake: its worker's answer is ignored.
        for (auto [node, id] : expired.cancels)
            if (auto n = slot_locked(node); n && n->conn &&
                                            (sched_->state(node) == NodeState::ready ||
                                             sched_->state(node) == NodeState::draining))
                cancels.emplace_back(n->conn, id);
        const bool heartbeat = now >= next_hb_;
        if (heartbeat) next_hb_ = now + hb_;
        // A worker answers every heartbeat, even while its calls run: one that leaves a written
        // heartbeat unanswered past the bound is frozen or cut off, and its calls must not wait
        // forever.
        for (auto& n : nodes_) {
            // A resumed worker that goes quiet before it answered the heartbeat after its kept
            // answers does not hold its node past the window: the connection ends, and the
            // window being closed, the node is lost.
            if (const auto* w = n->life.window(); w && n->life.is<life::Resyncing>() && n->conn &&
                                                  now > w->deadline &&
                                                  n->conn->unanswered(now) > hb_)
                silent.emplace_back(n->conn, n->index, n->instance.id,
                                    "the resumed worker went silent before it caught up");
            touch_locked(*n, now, scale);
            // A draining node still runs its calls: it is watched like a ready one.
            if ((sched_->state(n->index) != NodeState::ready &&
                 sched_->state(n->index) != NodeState::draining) ||
                !n->conn)
                continue;
            if (heartbeat) heartbeats.push_back(n->conn);
            if (n->resumable) acks.push_back(n->conn);
            const auto quiet = n->conn->unanswered(now);
            if (quiet <= silence_) continue;
            auto why = fmt::format("the worker answered no heartbeat for {} s",
                                   std::chrono::duration_cast<std::chrono::seconds>(quiet).count());
            if (n->life.silent(why, now - quiet))
                silent.emplace_back(n->conn, n->index, n->instance.id, std::move(why));
        }
        if (now >= next_cost_) {
            next_cost_ = now + cost_interval;
            auto snap = cost_->snapshot(now);
            if (snap.hourly_rate > 0) cost_update = snap;  // Local and SSH cost nothing
        }
        if (now >= next_ledger_cost_) {
            const double spent = cost_->snapshot(now).accumulated_cost;
            if (spent != ledger_spent_) {
                ledger_spent_ = spent;
                ledger_spent = spent;
                next_ledger_cost_ = now + cost_interval;
            }
        }
        expire_world_calls_locked(now, scale);
        if (active_) {
            check_budget_locked(now, scale);
            rescale_locked(now, scale);
        }
    }
    act(scale);
    for (auto& [conn, index, id, why] : silent) {
        emit(ErrorEvent{fmt::format("node {}: {}; closing its connection", index, why), id});
        conn->close();  // its reader sees the end, and the node is lost with this reason
    }
    for (auto& [conn, id] : cancels) conn->write_control(MsgType::cancel, id);
    for (auto& conn : heartbeats) conn->heartbeat();
    for (auto& conn : acks) conn->flush_acks();  // answers that no call frame took along
    Completion::deliver(done);
    if (ledger_spent && ledger_) ledger_->spent(*ledger_spent);  // fsync'ed: outside the lock
    if (cost_update)
        emit(CostUpdate{cost_update->elapsed_seconds, cost_update->accumulated_cost,
                        cost_update->hourly_rate, cost_update->spot_count,
                        cost_update->ondemand_count});
    arm_timer();
}

// ---- teardown and state -----------------------------------------------------------------------

void PoolCore::close(bool report) {
    // A signal's teardown waits for every close() in progress, whichever thread runs it.
    signals::CloseScope signal_scope(this);
    std::vector<Completion> done;
    std::vector<std::pair<std::shared_ptr<NodeConnection>, std::string>> conns;
    std::vector<std::shared_ptr<BatchState>> waiting;
    {
        std::unique_lock lk(m_);
        if (closed_) {
            // Another close() is tearing down (a signal's, the owner's): this one returns once
            // it has ended, so that when the owner's close() or the destructor returns, every
            // event was delivered and no handler runs again. Not on a thread that the first
            // close() waits for (a handler on the event thread, a blocking task of this pool, an
            // I/O thread): that would wait for itself.
            const bool may_wait = !close_done_ && t_task_of != this && !io::on_io_thread() &&
                                  !(bus_ && bus_->on_own_thread());
            if (may_wait) close_cv_.wait(lk, [&] { return close_done_; });
            return;
        }
        closed_ = true;
        closing_ = true;
        active_ = false;
        if (sched_)
            for (auto& t : sched_->drain_all())
                done.push_back(Completion::failed(
                    t, std::make_exception_ptr(CancelledError("the pool was closed"))));
        // A distributed call whose world was waking, a resize or a drain in progress: none
        // completes now.
        for (auto& w : world_calls_) waiting.push_back(w.batch);
        world_calls_.clear();
        for (auto& w : waiters_) waiting.push_back(w.batch);
        waiters_.clear();
        for (auto& n : nodes_)
            if (n->conn) conns.emplace_back(n->conn, n->instance.id);
    }
    // Set however this close() ends (the report below throws): a close() waiting for this one
    // returns then. Destroyed before signal_scope, so a signal's teardown ends after it.
    struct Done {
        PoolCore* pool;
        ~Done() {
            {
                std::lock_guard lk(pool->m_);
                pool->close_done_ = true;
            }
            pool->close_cv_.notify_all();
        }
    } done_guard{this};
    if (auto self = weak_from_this().lock())  // none from the destructor: no handler is left
        boost::asio::post(strand_, [self] { self->timer_.cancel(); });
    if (backend_) backend_->begin_stop();  // a replacement in progress gives up
    Completion::deliver(done);
    for (auto& b : waiting)
        b->fail(0, std::make_exception_ptr(CancelledError("the pool was closed")));
    if (bus_) emit(PoolStopping{});
    for (auto& [conn, id] : conns) {
        if (bus_) emit(InstanceStopping{id});
        conn->write_control(MsgType::shutdown, 0);
    }
    {
        // Connects, replacements and loss reports in progress give up (begin_stop, closing_).
        std::unique_lock lk(m_);
        const int self_task = t_task_of == this ? 1 : 0;
        tasks_cv_.wait(lk, [&] { return tasks_running_ <= self_task; });
        for (auto& n : nodes_)
            if (n->conn && std::none_of(conns.begin(), conns.end(),
                                        [&](auto& c) { return c.first == n->conn; }))
                conns.emplace_back(n->conn, n->instance.id);
    }
    if (backend_) backend_->stop_all();
    if (ledger_) {
        // The spend at teardown, every machine confirmed ended: what `sky ls` shows last.
        double spent = 0;
        {
            std::lock_guard lk(m_);
            if (cost_) spent = cost_->snapshot(Clock::now()).accumulated_cost;
        }
        if (spent > 0) ledger_->spent(spent);
        ledger_->close();
    }
    for (auto& [conn, id] : conns) conn->close();
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
    for (int i : sched_ ? sched_->node_ids() : std::vector<int>{})
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
