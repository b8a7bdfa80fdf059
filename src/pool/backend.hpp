#pragma once
// What the pool asks of a provider: nodes that end in a connected stream to a worker (an
// io::Stream, which the pool reads and writes on the I/O core). Local spawns processes; SSH and
// the clouds provision, bootstrap, and tunnel. connect() and the other calls may block (a
// process spawn, a REST call, an SSH handshake): the pool calls them on the I/O core's bounded
// blocking pool, never on an I/O thread.
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/stream.hpp"
#include "runtime/crash_report.hpp"
#include "sky/errors.hpp"
#include "sky/events.hpp"
#include "sky/instance.hpp"
#include "sky/pool.hpp"

namespace sky::detail {

/// A started node: its instance, a stream to its worker, and the token the worker expects.
struct NodeStart {
    Instance instance;
    std::unique_ptr<io::Stream> stream;
    std::string token;
    /// The stream crosses a network sky does not otherwise encrypt (Slurm's cluster network):
    /// the worker must seal it (runtime/auth.hpp), else the handshake fails.
    bool seal = false;
    /// Variables the worker sets in its environment once its client is in, before its worker
    /// processes start and any call runs: they travel in the (sealed) hello instead of on the
    /// node's launch (a provider whose launch crosses such a network in clear).
    std::map<std::string, std::string> env;
};

/// Why a node's connection ended.
struct NodeExit {
    NodeLostError::Reason reason = NodeLostError::Reason::unreachable;
    std::string detail;
    /// The worker's crash report (runtime/crash_report.hpp), when a signal killed it and it
    /// could write one: the signal, the calls it ran, the crashing thread's stack.
    std::optional<WorkerCrash> crash;
};

/// A reconnect reached the node's machine, but no worker listens there any more (it exited or
/// crashed): trying again cannot help, the node is lost.
class WorkerGone : public Error {
public:
    using Error::Error;
};

/// A started node as a backend keeps it: its worker, how to reach it, and how it ended. SSH
/// machines (RemoteNode) and simulated ones (worker processes here) are both.
class NodeHandle {
public:
    virtual ~NodeHandle() = default;
    /// A new stream to the worker.
    virtual std::unique_ptr<io::Stream> connect_worker() = 0;
    /// The token the worker expects in the handshake.
    [[nodiscard]] virtual const std::string& token() const noexcept = 0;
    /// Whether the worker listens for its client after a dropped connection (SSH and cloud
    /// nodes); false where a dropped connection means a dead worker (a child process).
    [[nodiscard]] virtual bool can_reconnect() const { return false; }
    /// A new stream to the same worker after the last one dropped, within about `within`: a
    /// new tunnel, over a new session when the old one is dead. Throws WorkerGone when the
    /// machine answers but no worker listens, another error when it could not be reached.
    virtual std::unique_ptr<io::Stream> reconnect_worker(std::chrono::milliseconds within) {
        (void)within;
        throw WorkerGone("this node's worker cannot be reconnected to");
    }
    /// Starts a fresh worker after the last one ended (the machine stays).
    virtual void restart_worker(const std::function<void(Event)>& emit) = 0;
    /// Why the worker's connection ended.
    virtual NodeExit exit_reason() = 0;
    /// Whether the machine can still be reached (a fresh worker can start there).
    [[nodiscard]] virtual bool reachable() const = 0;
    /// Stops the worker and removes the pool's files. Never throws.
    virtual void stop() noexcept = 0;
};

/// The backend -> pool entry for a preemption notice (api.md §10a) that a provider learns of on
/// the client side (a pod's DisruptionTarget condition seen by a watch, a simulated cloud's
/// warning): call it with any `emit` the pool handed the backend (provision, add, connect,
/// restart_worker), from any thread, outside the backend's own locks. The pool's preemption
/// desk picks the checkpoint step, fans the notice out to every rank and reports one
/// PreemptionNotice per machine; a later call for the same machine (a firmer deadline) updates
/// what the ranks see without a second event. A notice the node learns of itself (its
/// launcher's probe, a batch system's signal) needs none of this: the worker forwards it on its
/// own stream, into the same desk.
inline void notify_preemption(const std::function<void(Event)>& emit, int node,
                              std::string instance_id,
                              std::chrono::system_clock::time_point deadline, std::string reason) {
    PreemptionNotice n;
    n.node = node;
    n.instance_id = std::move(instance_id);
    n.deadline = deadline;
    n.reason = std::move(reason);
    emit(std::move(n));
}

class Backend {
public:
    virtual ~Backend() = default;
    /// Acquires every instance (cloud: launch and wait; Local: nothing) for nodes 0 .. nodes-1.
    /// Throws typed errors; whatever it started is released by stop_all().
    virtual void provision(int nodes, const std::function<void(Event)>& emit) = 0;
    /// Prepares nodes that join a running pool, at these indexes (the pool picks each: the
    /// lowest index no node has, perhaps one released before); connect() then starts each. A
    /// node's index is its name: backends keep nodes by index, never by a count fixed at
    /// provision(). Throws ConfigError where the provider cannot add nodes (yet), saying so.
    virtual void add(const std::vector<int>& nodes, const std::function<void(Event)>& emit) {
        (void)emit;
        throw ConfigError("this pool's provider cannot add nodes to a running pool yet (" +
                          std::to_string(nodes.size()) +
                          " asked for): its pool keeps the size it started with");
    }
    /// Ends node `node` for good (its worker, and its machine where the pool rented one) and
    /// forgets it: its index may be added again. What could not be confirmed ended shows in
    /// leftovers(). Throws ConfigError where the provider cannot release one node (yet).
    virtual void release(int node) {
        throw ConfigError("this pool's provider cannot release node " + std::to_string(node) +
                          " on its own yet: its nodes end with the pool");
    }
    /// The hourly price (USD) a node added now would most likely run at (the first offer's),
    /// after provision(); 0 when it costs nothing or is not known. A budget's max_hourly_usd
    /// holds back a scale-up by it before anything is launched.
    [[nodiscard]] virtual double node_price() const { return 0; }
    /// Node 0's address as the other nodes reach it (after provision()).
    [[nodiscard]] virtual std::string head_address() const { return "127.0.0.1"; }
    /// Prepares node `node` and connects to its worker (called in parallel for the nodes).
    virtual NodeStart connect(int node, const std::function<void(Event)>& emit) = 0;
    /// After the node's connection ended: why.
    virtual NodeExit exit_reason(int node) = 0;
    /// Whether node `node`'s worker can be reached again when its connection drops (then the
    /// pool calls reconnect() before it counts the node as lost).
    [[nodiscard]] virtual bool can_reconnect(int node) const {
        (void)node;
        return false;
    }
    /// A new stream to node `node`'s worker (NodeHandle::reconnect_worker). May block.
    virtual std::unique_ptr<io::Stream> reconnect(int node, std::chrono::milliseconds within) {
        (void)node;
        (void)within;
        throw WorkerGone("this backend cannot reconnect to a worker");
    }
    /// Whether a lost node can be brought back (then connect() is called again).
    [[nodiscard]] virtual bool can_restart(int node) const = 0;
    /// The pool is closing: launches, waits and retries in progress give up soon (called before
    /// stop_all(), while a replacement may still be running on another thread). Never throws.
    virtual void begin_stop() noexcept {}
    /// Stops every instance and waits until they are gone. Never throws. Runs once: a later
    /// call (the destructor's, on whichever thread drops the pool last) does nothing.
    virtual void stop_all() noexcept = 0;
    /// After stop_all(): what could not be confirmed stopped, one line each (empty: nothing).
    [[nodiscard]] virtual std::vector<std::string> leftovers() const { return {}; }
};

}  // namespace sky::detail
