#pragma once
// The pool's engine: node connections, the scheduler (which slot runs which call), timeouts,
// node loss and restart, and teardown. ComputePool is a thin handle on it.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "catalog/cost.hpp"
#include "pool/backend.hpp"
#include "pool/event_bus.hpp"
#include "pool/ledger.hpp"
#include "runtime/protocol.hpp"
#include "sky/pool.hpp"

namespace sky::detail {

using Clock = std::chrono::steady_clock;

/// One call on its way: which batch item it completes, where it may run, what it printed.
struct Task {
    std::shared_ptr<BatchState> batch;
    std::size_t index = 0;
    CallDesc call;
    int retries_left = 0;
    int pinned = -1;         ///< node it must run on (broadcast), or -1
    int pinned_worker = -1;  ///< worker process (local rank) on that node, for a per-rank call
    int lost_on = -1;        ///< node it was lost with: a retry goes to another while one lives
    std::uint64_t seq = 0;
    std::optional<Clock::time_point> deadline;
    std::vector<std::string> log_tail;
};

/// Bytes to write to one node: small frames copied, large argument buffers referenced.
struct Outgoing {
    Buffer small;
    std::vector<std::pair<std::size_t, std::shared_ptr<const Buffer>>> big;
    [[nodiscard]] bool empty() const noexcept { return small.empty() && big.empty(); }
};

struct NodeSlot {
    enum class State { starting, ready, restarting, lost, closed };
    int index = 0;
    Instance instance;
    std::unique_ptr<Transport> transport;
    std::unique_ptr<FrameReader> frames;  ///< on `transport`, from the handshake on
    std::thread reader;
    std::mutex write_m;
    State state = State::starting;
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
    // From the worker's ready frame; guarded by PoolCore::m_.
    int workers = 1;                  ///< worker processes on the node (W)
    std::vector<std::int32_t> ports;  ///< a free port per worker process (rendezvous)
    // Guarded by PoolCore::m_.
    std::unordered_map<std::uint64_t, Task> inflight;
    std::deque<Task> pinned;
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
    struct Completion {
        std::shared_ptr<BatchState> batch;
        std::size_t index;
        Buffer result;
        std::exception_ptr error;
    };
    struct Received {
        std::uint64_t call_id;
        MsgType type;
        Buffer payload;
        ErrorMsg error;  ///< for error frames, decoded on arrival
    };

    void emit(Event e) { bus_->post(std::move(e)); }
    void connect_node(int i);
    void handshake(NodeSlot& n, const std::string& token);
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

    // Scheduler; every *_locked function runs under m_.
    void dispatch_locked(std::vector<Outgoing>& out);
    void assign_locked(NodeSlot& n, Task&& t, Outgoing& out);
    /// The first waiting call node i may take (not one lost with node i while another node
    /// lives), or pending_.end().
    std::deque<Task>::iterator pick_pending_locked(std::size_t i);
    /// True while some node is ready or being replaced: calls can still be served.
    [[nodiscard]] bool any_live_locked() const;
    /// The error of a call made (or left waiting) when no node is left: what ended them.
    [[nodiscard]] std::exception_ptr no_live_node_locked(Clock::time_point now) const;
    void fail_all_pending_locked(std::vector<Completion>& done,
                                 const std::function<std::exception_ptr()>& why);
    void send(std::vector<Outgoing>& out);
    void send_control(NodeSlot& n, MsgType type, std::uint64_t call_id);
    static void finish(std::vector<Completion>& done);
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
    std::deque<Task> pending_;
    std::uint64_t next_call_id_ = 0;
    std::uint64_t next_seq_ = 0;
    std::size_t rr_ = 0;
    bool closing_ = false;
    bool active_ = false;
    std::multimap<Clock::time_point, std::uint64_t> deadlines_;  // seq by deadline
    std::unordered_map<std::uint64_t, std::pair<int, std::uint64_t>>
        timed_inflight_;  // seq -> node, call
    std::deque<int> restart_queue_;
    std::vector<std::thread> restarters_;  ///< one per replacement; joined by close()
    std::thread supervisor_;
    bool stop_supervisor_ = false;
    bool closed_ = false;
};

}  // namespace sky::detail
