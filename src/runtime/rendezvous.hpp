#pragma once
// The rendezvous environment of a distributed-training call (api.md §11): which variables a
// plugin sets for one rank, the network interface that carries an address, free ports, and the
// process-wide scope in which the variables exist while a call runs.
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "runtime/protocol.hpp"
#include "sky/distributed.hpp"

namespace sky::detail {

using EnvVars = std::vector<std::pair<std::string, std::string>>;

/// Where one rank is: its node, its worker process on that node, the interface its peers
/// reach it through ("" when unknown: the *_SOCKET_IFNAME variables are then not set).
struct RankPlace {
    int node = 0;
    int worker = 0;
    std::string interface;
};

/// The variables `plugin` sets for the rank at `place` of a pool laid out as `layout`. Ranks
/// count the worker processes of the layout's first node first, then the second's, ...
/// (position × W + worker when every node has W); `place.node` is a node index, found in
/// `layout.nodes` (the world of an elastic pool may be nodes {0, 2}: node 2 is NODE_RANK 1).
/// Throws sky::Error when the layout does not hold the place.
EnvVars rendezvous_env(const PluginSpec& plugin, const PoolLayout& layout, const RankPlace& place);

/// The name of the network interface whose IPv4 address is `address` (a host name is resolved
/// first); "lo" for a loopback address; "" when no interface of this machine has it.
std::string interface_for_address(const std::string& address);

/// `n` distinct TCP ports that are free on this machine now (bound together, then released):
/// what the ranks of a node listen on later. Throws sky::Error when none can be bound.
std::vector<std::int32_t> pick_free_ports(int n);

/// Sets variables for the lifetime of the scope and restores what was there before (value or
/// absence) when the last scope with the same variables ends. setenv is process-wide: calls that
/// run at the same time in one worker process (PoolSpec::concurrency > 1) share one set; a call
/// whose set differs from the one in place fails at once with sky::Error rather than changing
/// the environment under a running call (or waiting for it, which could deadlock two jobs whose
/// ranks started in different orders on different nodes).
class ScopedEnv {
public:
    explicit ScopedEnv(EnvVars vars);
    ~ScopedEnv();
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;
};

}  // namespace sky::detail
