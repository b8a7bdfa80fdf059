#pragma once
/// \file Where a compute function runs (docs/api.md §10) and what a pool holds (docs/api.md §4).
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sky/export.hpp"

SKY_PUBLIC_BEGIN

/// The execution environment of the current call. Outside a worker: node 0 of 1.
struct InstanceInfo {
    int node = 0;
    int total_nodes = 1;
    bool is_head = true;
    std::vector<std::string> accelerators;
    std::string head_addr = "127.0.0.1";
    int head_port = 0;
    std::string job_id;
    /// This worker process on its node (0..workers_per_node-1): its GPU or MIG slice, its
    /// LOCAL_RANK in a distributed call.
    int worker = 0;
    /// Worker processes per node: one per GPU (or MIG slice) of the accelerator, else 1.
    int workers_per_node = 1;
    /// This node's address on the pool's private network (what its peers reach it at).
    std::string private_addr = "127.0.0.1";
    /// Every node's private address, in node order (peers[0] is the head).
    std::vector<std::string> peers;
    /// This node's host name as the node itself knows it (`gethostname`): on Slurm the compute
    /// node's name in the allocation, what `squeue` and the cluster's logs show.
    std::string hostname;

    template <class Archive>
    void serialize(Archive& ar) {
        ar(node, total_nodes, is_head, accelerators, head_addr, head_port, job_id, worker,
           workers_per_node, private_addr, peers, hostname);
    }
};

/// The environment of the calling thread's current call.
InstanceInfo instance_info();

/// A cloud's warning that one node of the pool is about to be reclaimed (api.md §10a).
struct Preemption {
    /// When the cloud takes the machine back (the cloud's time, as the pool learned it).
    std::chrono::system_clock::time_point deadline;
    int node = 0;             ///< the pool node being reclaimed
    std::string instance_id;  ///< its machine
    std::string reason;       ///< the provider's words ("spot instance-action: terminate")
    /// The step every rank should save: one more than the highest step any rank had reported
    /// with progress() when the notice came, picked once by the pool so that all ranks agree;
    /// -1 when no rank reports progress (save at once).
    std::int64_t checkpoint_step = -1;
};

/// The notice that stands for this pool, empty while none does. Cheap enough for every step:
/// a load of a published value, no system call and no lock.
[[nodiscard]] std::optional<Preemption> preemption();

/// Records `step` as this call's progress; the worker sends the latest to the client at least
/// once a second while it changes, and the pool picks a notice's checkpoint_step from it. A
/// store, no system call. Outside a compute function it does nothing.
void progress(std::int64_t step);

/// One node of a pool, as `pool.instances()` lists it.
struct Instance {
    std::string id;
    int node = 0;
    std::string provider;
    std::string instance_type;
    std::optional<std::string> public_ip;
    std::optional<std::string> private_ip;
    bool spot = false;
    double hourly_price = 0;     ///< USD per hour at which it runs (spot or on-demand)
    double on_demand_price = 0;  ///< USD per hour on-demand (for savings); 0 when free

    template <class Archive>
    void serialize(Archive& ar) {
        ar(id, node, provider, instance_type, public_ip, private_ip, spot, hourly_price,
           on_demand_price);
    }
};

SKY_PUBLIC_END
