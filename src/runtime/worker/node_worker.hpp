#pragma once
// A node's worker with one worker process per GPU or MIG slice: it starts them, relays the
// client's calls to them and their frames back. It is a client of its worker processes through
// the same ClientChannel as the pool's.
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "metrics/metrics.hpp"
#include "runtime/client_channel.hpp"
#include "runtime/protocol.hpp"
#include "runtime/worker/core.hpp"
#include "runtime/worker/outbox.hpp"

namespace sky::detail {

class NodeWorker {
public:
    /// `crash_file`: this worker's (its worker processes write theirs beside it).
    NodeWorker(WorkerCore& core, Outbox& out, std::string crash_file)
        : core_(core), out_(out), crash_file_(std::move(crash_file)) {}
    ~NodeWorker() { stop(); }
    NodeWorker(const NodeWorker&) = delete;
    NodeWorker& operator=(const NodeWorker&) = delete;

    /// Decides W (nvidia-smi where needed), exports the accelerator, picks the ports and starts
    /// the worker processes when W > 1, filling `ready`. A worker process that a node's worker
    /// started takes what that worker says. False, with a message, when it cannot.
    bool plan_and_start(const ClientHello& ch, std::uint64_t max_frame, WorkerReady& ready);
    /// Whether calls go to worker processes (W > 1) rather than run here.
    [[nodiscard]] bool relaying() const noexcept { return !children_.empty(); }
    /// Starts reading each worker process's frames.
    void start_relays();
    /// Sends the call to the worker process it names, else to the least busy one; false, and
    /// nothing sent, when a call of that id is relayed already and has not answered.
    bool relay_call(Frame& f);
    /// The relayed calls that said "started" and have not answered yet, in id order.
    [[nodiscard]] std::vector<std::uint64_t> started() const;
    /// In a resumable session a relayed call stays known after its answer until the client
    /// acknowledges it (forget()), so a call frame sent again after a resume is never relayed
    /// a second time (Executor::keep_answered).
    void keep_answered(bool on);
    void forget(std::span<const std::uint64_t> call_ids);
    /// Passes a cancel or a confirm on to the worker process that has the call.
    void relay_control(MsgType type, std::uint64_t id);
    /// Sends a frame to every worker process (the layout).
    void send_all(MsgType type, std::span<const std::byte> payload);
    /// Asks them to shut down, waits up to 5 s, kills what is left and joins the relays.
    void stop();

private:
    /// A worker process this node's worker started.
    struct ChildWorker {
        int index = 0;
        int pid = -1;
        std::unique_ptr<ClientChannel> channel;
        std::mutex write_m;
        std::thread thread;
        int load = 0;  // calls relayed and not answered; under NodeWorker::m_
    };

    // Separate processes, not threads: CUDA reads CUDA_VISIBLE_DEVICES once, when it
    // initialises, so each GPU's worker needs an environment of its own from the start.
    bool start_children(const ClientHello& ch, const WorkerPlan& plan,
                        const std::string& accelerator, std::uint64_t max_frame);
    void send_to(ChildWorker& c, MsgType type, std::uint64_t id, std::uint16_t flags,
                 std::span<const std::byte> payload);
    void forward(const Frame& f);
    void relay_loop(ChildWorker* c);

    /// The crash file of worker process k.
    [[nodiscard]] std::string child_crash_file(int k) const;

    WorkerCore& core_;
    Outbox& out_;
    std::string crash_file_;
    std::vector<std::unique_ptr<ChildWorker>> children_;
    /// A relayed call: the worker process that has it, and whether it said "started".
    struct Routed {
        int child = 0;
        bool started = false;
    };
    mutable std::mutex m_;
    std::unordered_map<std::uint64_t, Routed> routed_;  // by call id; under m_
    std::unordered_set<std::uint64_t> answered_;        // not acknowledged yet; under m_
    bool keep_answered_ = false;                        // under m_
    std::atomic<bool> stopping_{false};
};

}  // namespace sky::detail
