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
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "catalog/cost.hpp"
#include "io/io_core.hpp"
#include "ledger/ledger.hpp"
#include "pool/backend.hpp"
#include "pool/event_bus.hpp"
#include "pool/node_connection.hpp"
#include "pool/scheduler.hpp"
#include "sky/pool.hpp"

namespace sky::detail {

/// One node as the supervisor keeps it: its machine, its connection and why it ended; all
/// guarded by PoolCore::m_. Its scheduling state (ready, lost, calls in flight) is the
/// Scheduler's.
struct NodeSlot {
    int index = 0;
    Instance instance;
    /// The current connection to its worker (from connect on).
    std::shared_ptr<NodeConnection> conn;
    /// Counts the node's connections: an event of one that is no longer current is dropped.
    std::uint64_t generation = 0;
    /// Replacement attempts so far (failed ones too): at most max_restarts.
    int restarts = 0;
    /// Why the supervisor ended the connection for silence (empty: it did not), or why a
    /// dropped connection could not be resumed: the node's loss then says this.
    std::string silence_reason;
    /// When the heartbeat that went unanswered was written (with silence_reason).
    Clock::time_point silent_since{};
    /// The worker's token and session (ClientHello::session, random per started worker): a
    /// connection that comes back after a drop proves the one and resumes the other.
    std::string token;
    std::string session;
    /// The backend can reach this node's worker again after its connection drops.
    bool resumable = false;
    /// The connection dropped and the pool is reconnecting (the node's calls stay in flight)
    /// until reconnect_deadline; resync: the resumed worker's kept answers are arriving, and
    /// the heartbeat sent after its ready frame marks their end.
    bool reconnecting = false;
    bool resync = false;
    Clock::time_point dropped_at{};
    Clock::time_point reconnect_deadline{};
    int reconnect_attempts = 0;
    /// During a resync: answers the pool was waiting for, and answers it had already (the
    /// worker keeps only what was not acknowledged, so these are the last second's at most).
    std::size_t resumed_answers = 0;
    std::size_t resumed_again = 0;
    std::string drop_reason;   ///< why the connection dropped
    bool drop_silent = false;  ///< it was ended for silence
    std::string resume_error;  ///< why the last reconnect attempt failed
    /// Why the node was last lost: a call made when no node is left fails with it.
    NodeLostError::Reason lost_reason = NodeLostError::Reason::unreachable;
    std::string lost_detail;
    /// A free port per worker process, from the worker's ready frame (rendezvous).
    std::vector<std::int32_t> ports;
    /// The connection ended while the pool was still starting: handled once it is active.
    std::optional<std::pair<std::string, bool>> ended_early;
};

class PoolCore : public std::enable_shared_from_this<PoolCore> {
public:
    /// A pool of `spec`; its backend comes from the provider registry unless one is given
    /// (tests drive the engine with a backend of their own).
    explicit PoolCore(PoolSpec spec, std::unique_ptr<Backend> backend = nullptr);
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

    void emit(Event e) { bus_->post(std::move(e)); }
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
    void cost_started(const Instance& i);
    /// Sends every node where every rank is (a layout frame): before the first call, and after
    /// a node was replaced (its ports and perhaps its address changed). With `joining` (a
    /// replacement that just finished its handshake), only that node and the ready ones get it:
    /// another node may be in the middle of its own handshake, where a layout frame would come
    /// before the hello its worker waits for.
    void send_layout(int joining = -1);

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
    /// never got go again and the node takes calls (under m_).
    void resync_locked(NodeSlot& n, Sends& sends);

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
    std::unique_ptr<Backend> backend_;
    std::unique_ptr<EventBus> bus_;
    std::vector<std::unique_ptr<NodeSlot>> nodes_;  // the vector is fixed once prepared
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
    std::vector<std::exception_ptr> start_errors_;

    // Blocking tasks in progress, guarded by m_.
    int tasks_running_ = 0;
    std::condition_variable tasks_cv_;

    // The supervisor's timer.
    boost::asio::strand<boost::asio::io_context::executor_type> strand_;
    boost::asio::steady_timer timer_;                        // on strand_
    Clock::time_point timer_at_ = Clock::time_point::max();  // guarded by m_
    Clock::time_point next_hb_{}, next_cost_{};              // on strand_
};

}  // namespace sky::detail
