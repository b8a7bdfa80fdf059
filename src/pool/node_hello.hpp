#pragma once
// What the pool says to a node's worker in its hello (runtime/protocol.hpp's ClientHello): who
// the node is, the pool's shape and bounds, the session it resumes. Built from the pool's spec
// here, so that the supervisor (pool_core.cpp) decides when to connect and this file what the
// worker is told.
#include <chrono>
#include <map>
#include <string>

#include "runtime/protocol.hpp"
#include "sky/instance.hpp"
#include "sky/pool.hpp"

namespace sky::detail {

/// One connection's facts that the spec does not hold.
struct NodeHelloFacts {
    std::string pool_id;
    int node = 0;
    Instance instance;
    std::string head_addr;  ///< the head's address (its port comes later, with the layout)
    std::string session;    ///< the worker's session: the same on every connection to it
    bool resume = false;    ///< a connection that comes back after a dropped one
    /// How long the worker waits for its client after a drop; zero for a worker that cannot be
    /// reached again (it ends at once, as after a shutdown).
    std::chrono::seconds reconnect_wait{0};
    /// Variables the worker sets once connected (NodeStart::env), sent on a first connection.
    const std::map<std::string, std::string>* env = nullptr;
};

/// The hello for one node's worker.
[[nodiscard]] ClientHello node_hello(const PoolSpec& spec, const NodeHelloFacts& facts);

}  // namespace sky::detail
