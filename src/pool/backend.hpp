#pragma once
// What the pool asks of a provider: nodes that end in a connected transport to a worker.
// Local spawns processes; SSH and the clouds provision, bootstrap, and tunnel.
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "runtime/transport.hpp"
#include "sky/errors.hpp"
#include "sky/events.hpp"
#include "sky/instance.hpp"
#include "sky/pool.hpp"

namespace sky::detail {

/// A started node: its instance, a transport to its worker, and the token the worker expects.
struct NodeStart {
    Instance instance;
    std::unique_ptr<Transport> transport;
    std::string token;
};

/// Why a node's connection ended.
struct NodeExit {
    NodeLostError::Reason reason = NodeLostError::Reason::unreachable;
    std::string detail;
};

class Backend {
public:
    virtual ~Backend() = default;
    [[nodiscard]] virtual std::string provider_name() const = 0;
    /// Acquires every instance (cloud: launch and wait; Local: nothing). Throws typed errors;
    /// whatever it started is released by stop_all().
    virtual void provision(int nodes, const std::function<void(Event)>& emit) = 0;
    /// Node 0's address as the other nodes reach it (after provision()).
    [[nodiscard]] virtual std::string head_address() const { return "127.0.0.1"; }
    /// Prepares node `node` and connects to its worker (called in parallel for the nodes).
    virtual NodeStart connect(int node, const std::function<void(Event)>& emit) = 0;
    /// After the node's connection ended: why.
    virtual NodeExit exit_reason(int node) = 0;
    /// Whether a lost node can be brought back (then connect() is called again).
    [[nodiscard]] virtual bool can_restart(int node) const = 0;
    /// Stops every instance and waits until they are gone. Never throws.
    virtual void stop_all() noexcept = 0;
};

/// The backend for a spec's provider; throws ConfigError for providers this build lacks.
std::unique_ptr<Backend> make_backend(const PoolSpec& spec, const std::string& pool_id);

}  // namespace sky::detail
