#pragma once
// The pool's supervisor: it starts the nodes, owns their connections (a NodeConnection each, on
// the I/O core), watches deadlines, heartbeats and silent nodes with one timer, replaces lost
// nodes and tears everything down. Which call runs where is the Scheduler's
// (pool/scheduler.hpp), consulted under the supervisor's lock. What may block (a backend's
// connect, exit_reason or stop) runs on the I/O core's bounded blocking pool, never on a thread
// per node. ComputePool is a thin handle on it.
#include <atomic>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "catalog/cost.hpp"
#include "io/io_core.hpp"
#include "ledger/ledger.hpp"
#include "pool/autoscale.hpp"
#include "pool/backend.hpp"
#include "pool/backend_factory.hpp"
#include "pool/event_bus.hpp"
#include "pool/node_connection.hpp"
#include "pool/node_life.hpp"
#include "pool/preemption.hpp"
#include "pool/scheduler.hpp"
#include "runtime/protocol.hpp"
#include "sky/pool.hpp"

namespace sky::detail {

/// One node as the supervisor keeps it: its machine, its connection, where it is in its life
/// (pool/node_life.hpp) and why it was last lost; all guarded by PoolCore::m_. Its scheduling
/// state (ready, lost, calls in flight) is the Scheduler's.
struct NodeSlot {
    int index = 0;
    Instance instance;
    /// The current connection to its worker (from connect on).
    std::shared_ptr<NodeConnection> conn;
    /// Names its current connection (a pool-wide count): an event of one that is no longer
    /// current is dropped.
    std::uint64_t generation = 0;
    /// Replacement attempts so far (failed ones too): at most max_restarts.
    int restarts = 0;
    /// Starting, ready, reconnecting (its window), resyncing, replacing, lost.
    NodeLife life;
    /// The worker's token and session (ClientHello::session, random per started worker): a
    /// connection that comes back after a drop proves the one and resumes the other.
    std::string token;
    std::string session;
    /// The worker seals its stream (NodeStart::seal): a resumed connection must too.
    bool seal = false;
    /// The backend can reach this node's worker again after its connection drops.
    bool resumable = false;
    /// Why the node was last lost: a call made when no node is left fails with it.
    NodeLostError::Reason lost_reason = NodeLostError::Reason::unreachable;
    std::string lost_detail;
    /// A free port per worker process, from the worker's ready frame (rendezvous).
    std::vector<std::int32_t> ports;

    // An elastic pool's view of the node (pool/autoscale.hpp).
    /// When it joined (the constructor's nodes: when the pool started): newest leaves first.
    Clock::time_point joined_at{};
    /// Since when it has had no call in flight or pinned (meaningful while `busy` is false).
    Clock::time_point idle_since{};
    bool busy = false;
    /// Joining a running pool: its machine and worker are being started.
    bool joining = false;
    /// Leaving (drained, scaled down, budget stopped): takes no new call, ends once idle.
    bool leaving = false;
    /// Its end is under way (end_node): its connection closed, the backend releasing it.
    bool ending = false;
};

class PoolCore : public std::enable_shared_from_this<PoolCore> {
public:
    /// A pool of `spec` on `provider` (what its maker, the registry, knows of the provider): its
    /// backend is made when the pool starts.
    PoolCore(PoolSpec spec, PoolProvider provider);
    /// A pool of `spec` on a backend of the caller's (tests drive the engine so). Nothing is
    /// known of who reaches its nodes, so a distributed call says so; time is billed per second.
    PoolCore(PoolSpec spec, std::unique_ptr<Backend> backend);
    ~PoolCore();

    /// Provisions and connects every node; on failure tears down and rethrows. Blocks the
    /// calling thread, which must not be one of sky's I/O threads.
    void start();
    /// start() without blocking a thread: provisioning and connecting run on the blocking pool
    /// and the handshakes on the I/O core; `done` gets null once the pool runs, or the error
    /// once what was started is torn down. It runs on one of sky's threads: it must not block.
    void start_async(std::function<void(std::exception_ptr)> done);
    /// Queues calls (one per node when `broadcast`) and returns their shared state.
    std::shared_ptr<BatchState> submit(const std::vector<const CallDesc*>& calls, bool broadcast);
    /// Tears down; with `report`, throws sky::Error naming what could not be confirmed stopped
    /// (the pool is closed either way).
    void close(bool report);

    // Elastic pools (api.md §4a).
    /// Sets the desired count; the batch (one item) completes when the pool has exactly that
    /// many ready nodes. Throws ConfigError, NotResizableError, BudgetExceededError.
    std::shared_ptr<BatchState> resize(int n);
    /// New bounds (max = 0: autoscaling off, fixed at the nodes there now).
    void resize(const Autoscale& bounds);
    /// Node `node` leaves once its calls are done; the batch completes when it has ended.
    std::shared_ptr<BatchState> drain(int node);
    /// Forgets the frozen world of distributed calls.
    void release_world();

    [[nodiscard]] bool active() const noexcept;
    [[nodiscard]] int instance_count() const noexcept;
    [[nodiscard]] std::vector<Instance> instances() const;
    [[nodiscard]] double cost() const;
    [[nodiscard]] const std::string& id() const noexcept { return id_; }
    [[nodiscard]] const PoolSpec& spec() const noexcept { return spec_; }
    void add_handler(std::function<void(const Event&)> h) { bus_->add_handler(std::move(h)); }

private:
    using NodeState = Scheduler::NodeState;
    using Sends = std::vector<std::pair<std::shared_ptr<NodeConnection>, Outgoing>>;

    /// What a scaling step decided under the lock, done after it (act()): nodes to start and
    /// end, events to send, calls and waiters to complete.
    struct Scale {
        std::vector<int> start;
        std::vector<int> end;
        std::vector<Event> events;
        std::vector<Completion> done;
        std::vector<std::pair<std::shared_ptr<BatchState>, std::exception_ptr>> waiters;
    };
    /// A distributed call that woke an elastic pool: it runs on the world it froze once every
    /// node of it is ready (its batch then grows to one item per rank).
    struct WorldCall {
        std::shared_ptr<BatchState> batch;
        CallDesc call;
        Clock::time_point submitted;
    };
    /// A resize() or drain() waiting: the count it asked for, or the node it drains.
    struct Waiter {
        std::shared_ptr<BatchState> batch;
        int want = -1;
        int node = -1;
    };

    // Scaling (pool/autoscale.hpp decides; these do what it says).
    /// What the decision sees now (under m_).
    [[nodiscard]] ScaleInput scale_input_locked() const;
    /// Runs the decision and records what to do in `s` (under m_).
    void rescale_locked(Clock::time_point now, Scale& s);
    /// Node n leaves: no new call; ended now when it has none (under m_).
    void leave_locked(NodeSlot& n, Scale& s);
    /// Marks a node busy or idle from its calls; a leaving node with none is ended (under m_).
    void touch_locked(NodeSlot& n, Clock::time_point now, Scale& s);
    /// Completes the resize and drain waiters that are satisfied (under m_).
    void check_waiters_locked(Scale& s);
    /// The budget: BudgetWarning once, and the hard stop (under m_).
    void check_budget_locked(Clock::time_point now, Scale& s);
    /// How many of `want` more nodes max_hourly_usd allows now (under m_).
    [[nodiscard]] int hourly_allows_locked(int want, Clock::time_point now) const;
    /// Whether calls can still be served: a live node, one joining, or an elastic pool that
    /// can wake (under m_).
    [[nodiscard]] bool serving_locked() const;
    /// A distributed call on an elastic pool whose world is not there yet (no node ready, or
    /// the nodes it woke still joining): wakes max(min, 1) nodes as its world and returns its
    /// batch; nullptr when the call can go the ordinary way.
    std::shared_ptr<BatchState> submit_to_waking_world(const CallDesc& call);
    /// The woken world is ready: its layout goes out and its calls are placed (under m_).
    void place_world_calls_locked(Clock::time_point now, Scale& s);
    /// World node i failed to join: another node takes its place, or with the retries spent
    /// the world's calls fail with `e` (under m_).
    void world_join_failed_locked(int i, const std::exception_ptr& e, bool final, Scale& s);
    /// World calls past their .timeout() fail: they were waiting for a node (under m_).
    void expire_world_calls_locked(Clock::time_point now, Scale& s);
    /// Fails every world call still waiting with `e` (under m_).
    void fail_world_calls_locked(const std::exception_ptr& e, Scale& s);
    /// A slot for a node that joins now at index `i`, counted as joining (under m_).
    void join_slot_locked(int i, Clock::time_point now);
    /// join_slot_locked at the lowest free index, which it returns (under m_).
    int wake_slot_locked(Clock::time_point now);
    /// Does what a scaling step decided (outside the lock).
    void act(Scale& s);
    /// A node joins: the backend adds it, then it connects like a replacement (blocking pool).
    void join(int i);
    void joined(int i, std::exception_ptr e);
    /// Ends node i for good: its connection closed, the backend releases it, its slot and
    /// scheduler entry removed, its cost stopped (blocking pool).
    void end_node(int i);

    /// A provider's PreemptionNotice goes to the preemption desk, which completes it (once per
    /// machine) and fans it out; every other event goes to the bus as it is.
    void emit(Event e);
    /// Node i's slot, or nullptr when the pool has no node i: under m_, and taking it.
    [[nodiscard]] std::shared_ptr<NodeSlot> slot_locked(int i) const;
    [[nodiscard]] std::shared_ptr<NodeSlot> slot(int i) const;
    /// A slot for node i (kept in index order), or the one it has (under m_).
    NodeSlot& add_slot_locked(int i);
    /// Node i's instance id, or empty (under m_).
    [[nodiscard]] std::string instance_id_locked(int i) const;
    /// Runs `task` on the blocking pool, counted so that close() waits for it; a task that
    /// would start after close() began runs `skipped` instead.
    void run_blocking(std::function<void()> task, std::function<void()> skipped = {});

    // Start-up.
    /// What start() does before the nodes connect: checks, ledger, backend, provision.
    void prepare();
    void start_node(int i);
    void node_started(int i, std::exception_ptr e);
    void finish_start();

    /// Connects node i's stream and runs the handshake; `done` gets its outcome on an I/O
    /// thread (after the node's ports and workers are recorded). Throws CancelledError when
    /// the pool is closing.
    /// With `resume_within`, the stream is a reconnect to the node's worker: the hello resumes
    /// its session, and the handshake must end within that bound.
    void attach(int i, NodeStart s, std::function<void(std::exception_ptr)> done,
                std::optional<std::chrono::seconds> resume_within = std::nullopt);
    std::exception_ptr on_ready(int i, std::uint64_t generation, const WorkerReady& ready,
                                bool resumed);
    void on_frames(int i, std::uint64_t generation, const std::string& instance_id,
                   std::vector<Incoming>& frames);
    void on_ended(int i, std::uint64_t generation, const std::string& why, bool protocol_error);
    /// The backend launched a machine: it accrues from now (under no lock; takes m_).
    void cost_launched(const InstanceProvisioned& p);
    /// A worker answered: its machine accrues from now unless its launch already started it.
    void cost_started(const Instance& i);
    /// Sends every node where every rank is (a layout frame): before the first call, and after
    /// a node was replaced (its ports and perhaps its address changed). With `joining` (a
    /// replacement that just finished its handshake), only that node and the ready ones get it:
    /// another node may be in the middle of its own handshake, where a layout frame would come
    /// before the hello its worker waits for.
    void send_layout(int joining = -1);
    /// Where every rank is: the frozen world's nodes, else every node not leaving; position k
    /// names its node (under m_).
    [[nodiscard]] PoolLayout layout_locked() const;
    /// A distributed call froze the world: every ready node gets its layout now, written under
    /// m_ so that it precedes the world's first call on each connection.
    void send_world_layout_locked();

    // A dropped connection (docs/faults.md, "A dropped connection").
    /// Node i's connection dropped: opens (or keeps) its reconnect window and takes it out of
    /// dispatch, its calls still in flight. False when the window has already closed.
    bool start_reconnect_locked(NodeSlot& n, const std::string& why, Clock::time_point now);
    /// One reconnect attempt (on the blocking pool).
    void reconnect_attempt(int i);
    /// An attempt failed: the next one after a pause, or the node is lost past the window.
    void retry_reconnect(int i, const std::string& why);
    /// The window closed, or the worker is gone (`worker_gone`: the machine answered, no
    /// worker listens): the node is lost as any other (on the blocking pool).
    void give_up_reconnect(int i, const std::string& why, bool worker_gone);
    /// The resumed worker answered the heartbeat that follows its kept answers: the calls it
    /// never got go again and the node takes calls (under m_). What the resync brought, or
    /// nothing when the node was not resyncing.
    std::optional<Resynced> resync_locked(NodeSlot& n, Clock::time_point now, Sends& sends);

    // Loss and replacement (on the blocking pool).
    /// Node i's connection ended: why (the backend's word), its calls retried or failed, and a
    /// replacement started when one is allowed.
    void node_ended(int i, std::uint64_t generation, const std::string& why, bool protocol_error);
    /// One replacement attempt for node i.
    void replace(int i, const std::string& old_id);
    void replacement_failed(int i, const std::string& old_id, const std::string& why);
    void replacement_ready(int i, const std::string& old_id);
    /// Whether node i may get one more replacement attempt now (under m_).
    [[nodiscard]] bool may_restart_locked(int i) const;

    // The supervisor's timer (on strand_).
    void tick();
    void arm_timer();
    /// After a call with an earlier deadline than the timer's was queued (under m_).
    void timer_sooner_locked();

    bool cancel_batch(BatchState* b);
    /// Runs the scheduler's dispatch, encoding each assigned call for its node (under m_).
    void dispatch_locked(Sends& sends);
    /// The error of a call made (or left waiting) when no node is left: what ended them.
    [[nodiscard]] std::exception_ptr no_live_node_locked(Clock::time_point now) const;
    /// When no node is left: every waiting call fails (under m_).
    void fail_waiting_if_none_live_locked(std::vector<Completion>& done);
    static void send(Sends& sends);
    std::exception_ptr error_from(const NodeSlot& n, const Task& t, ErrorMsg e);

    PoolSpec spec_;
    std::string id_;
    /// How often a ready node gets a heartbeat, and how long a written heartbeat may go
    /// unanswered before the node is lost (docs/architecture.md, "Silence").
    std::chrono::seconds hb_;
    std::chrono::seconds silence_;
    std::unique_ptr<Ledger> ledger_;  // outlives the backend, which writes to it
    PoolProvider provider_;
    std::unique_ptr<Backend> backend_;
    std::unique_ptr<EventBus> bus_;
    std::unique_ptr<PreemptionDesk> preempt_;  // from prepare(); thread-safe on its own
    /// The nodes by index, lowest first (guarded by m_). Indexes may have gaps once nodes come
    /// and go: look a node up by its index (slot_locked), never by position. A task that works
    /// on a node outside the lock holds its slot.
    std::vector<std::shared_ptr<NodeSlot>> nodes_;
    std::uint64_t generations_ = 0;  ///< connections so far, pool-wide (guarded by m_)
    Clock::time_point started_at_;
    std::unique_ptr<CostTracker> cost_;  // guarded by m_

    mutable std::mutex m_;
    std::unique_ptr<Scheduler> sched_;  // guarded by m_
    bool closing_ = false;
    bool active_ = false;
    bool closed_ = false;
    bool close_done_ = false;                    // the first close() has ended (guarded by m_)
    std::condition_variable close_cv_;           // close_done_ set
    std::atomic<bool> exposure_noticed_{false};  // the distributed-call notice was given

    // Start-up, guarded by m_.
    std::function<void(std::exception_ptr)> start_done_;
    int start_left_ = 0;
    std::map<int, std::exception_ptr> start_errors_;  // by node

    // Blocking tasks in progress, guarded by m_.
    int tasks_running_ = 0;
    std::condition_variable tasks_cv_;

    // The supervisor's timer.
    boost::asio::strand<boost::asio::io_context::executor_type> strand_;
    boost::asio::steady_timer timer_;                        // on strand_
    Clock::time_point timer_at_ = Clock::time_point::max();  // guarded by m_
    Clock::time_point next_hb_{}, next_cost_{};              // on strand_
    double ledger_spent_ = 0;               ///< the spend last recorded (guarded by m_)
    Clock::time_point next_ledger_cost_{};  ///< the next record's earliest time (guarded by m_)

    // Elastic state, guarded by m_.
    bool elastic_ = false;        ///< autoscale.max > 0 (now: resize(Autoscale) may change it)
    ScaleBounds bounds_;          ///< a fixed pool's are {n, n}
    std::optional<int> desired_;  ///< a resize in progress
    std::vector<Waiter> waiters_;
    std::vector<int> world_;  ///< the frozen world of distributed calls (empty: none)
    /// The world's nodes were woken by a distributed call and are not all ready yet.
    bool world_forming_ = false;
    bool release_world_when_placed_ = false;  ///< release_world() came while it formed
    std::vector<WorldCall> world_calls_;
    int joining_ = 0;
    int workers_per_node_ = 1;  ///< the most worker processes a ready node reported
    int scale_failures_ = 0;    ///< joins failed in a row
    Clock::time_point next_scale_try_{};
    double price_ = 0;        ///< a new node's likely hourly price (the backend's, then seen)
    int hourly_refused_ = 0;  ///< nodes max_hourly_usd held back at the last decision
    bool budget_warned_ = false;
    bool budget_stopped_ = false;
    std::exception_ptr budget_error_;
    Clock::time_point next_budget_ = Clock::time_point::max();
};

}  // namespace sky::detail
