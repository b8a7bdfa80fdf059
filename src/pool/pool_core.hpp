#pragma once
// The pool's supervisor: it starts the nodes and owns their connections (a ClientChannel each,
// read by a thread per node), watches deadlines, heartbeats and silent nodes, replaces lost
// nodes and tears everything down. Which call runs where is the Scheduler's (pool/scheduler.hpp),
// consulted under the supervisor's lock. ComputePool is a thin handle on it.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "catalog/cost.hpp"
#include "pool/backend.hpp"
#include "pool/event_bus.hpp"
#include "pool/ledger.hpp"
#include "pool/scheduler.hpp"
#include "runtime/client_channel.hpp"
#include "sky/pool.hpp"

namespace sky::detail {

/// One node as the supervisor keeps it: its machine, its connection and why it ended. Its
/// scheduling state (ready, lost, calls in flight) is the Scheduler's.
struct NodeSlot {
    int index = 0;
    Instance instance;  ///< guarded by PoolCore::m_
    /// The connection to its worker, from connect on; the pointer and every write are guarded
    /// by write_m (the reader thread reads it without the lock).
    std::unique_ptr<ClientChannel> channel;
    std::thread reader;
    std::mutex write_m;
    int restarts = 0;
    /// When the last frame from the worker arrived (steady clock, ns): the supervisor declares
    /// a node that stays silent past the heartbeat bound lost.
    std::atomic<std::int64_t> last_heard{0};
    std::atomic<bool> silent{false};  ///< ended by the supervisor for not answering
    std::string silence_reason;       ///< why, guarded by write_m
    /// Why the node was last lost (guarded by PoolCore::m_): a call made when no node is left
    /// fails with it.
    NodeLostError::Reason lost_reason = NodeLostError::Reason::unreachable;
    std::string lost_detail;
    /// A free port per worker process, from the worker's ready frame (rendezvous); guarded by
    /// PoolCore::m_.
    std::vector<std::int32_t> ports;
};

class PoolCore : public std::enable_shared_from_this<PoolCore> {
public:
    /// A pool of `spec`; its backend comes from the provider registry unless one is given
    /// (tests drive the engine with a backend of their own).
    explicit PoolCore(PoolSpec spec, std::unique_ptr<Backend> backend = nullptr);
    ~PoolCore();

    /// Provisions and connects every node; on failure tears down and rethrows.
    void start();
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

    void emit(Event e) { bus_->post(std::move(e)); }
    void connect_node(int i);
    /// Connects node i through the backend and runs the handshake (a start or a replacement).
    void attach(NodeSlot& n, NodeStart s);
    /// Sends every node where every rank is (a layout frame): before the first call, and after
    /// a node was replaced (its ports and perhaps its address changed). With `joining` (a
    /// replacement that just finished its handshake), only that node and the ready ones get it:
    /// another node may be in the middle of its own handshake, where a layout frame would come
    /// before the hello its worker waits for.
    void send_layout(const NodeSlot* joining = nullptr);
    void reader_loop(NodeSlot* n);
    void node_lost(NodeSlot* n, const std::string& why, bool protocol_error);
    void supervisor_loop();
    void cost_started(const Instance& i);
    void restart_node(int i);
    bool cancel_batch(BatchState* b);

    /// Runs the scheduler's dispatch, encoding each assigned call for its node (under m_).
    void dispatch_locked(std::vector<Outgoing>& out);
    /// The error of a call made (or left waiting) when no node is left: what ended them.
    [[nodiscard]] std::exception_ptr no_live_node_locked(Clock::time_point now) const;
    /// When no node is left: every waiting call fails (under m_).
    void fail_waiting_if_none_live_locked(std::vector<Completion>& done);
    void send(std::vector<Outgoing>& out);
    void send_control(NodeSlot& n, MsgType type, std::uint64_t call_id);
    /// Writes on node n's connection; a failed write shuts it down (its reader sees the loss).
    template <class Write>
    void write_to(NodeSlot& n, Write&& write);
    std::exception_ptr error_from(const NodeSlot& n, const Task& t, ErrorMsg e);

    PoolSpec spec_;
    std::string id_;
    std::unique_ptr<Ledger> ledger_;  // outlives the backend, which writes to it
    std::unique_ptr<Backend> backend_;
    std::unique_ptr<EventBus> bus_;
    std::vector<std::unique_ptr<NodeSlot>> nodes_;
    Clock::time_point started_at_;
    std::unique_ptr<CostTracker> cost_;  // guarded by m_

    mutable std::mutex m_;
    std::condition_variable sup_cv_;
    std::unique_ptr<Scheduler> sched_;  // guarded by m_
    bool closing_ = false;
    bool active_ = false;
    std::atomic<bool> exposure_noticed_{false};  // the distributed-call notice was given
    std::deque<int> restart_queue_;
    std::vector<std::thread> restarters_;  ///< one per replacement; joined by close()
    std::thread supervisor_;
    bool stop_supervisor_ = false;
    bool closed_ = false;
};

}  // namespace sky::detail
