// Distributed training's rendezvous, without a framework (seed 002: `@distributed.torch(backend=
// "nccl")`, `.jax()`, ...). `.with(sky::distributed::torch{...})` makes the worker set the
// variables PyTorch's c10d (and torchrun) read, only while that call runs; a broadcast of it runs
// once per rank. Here the function just reports them; examples/ddp_libtorch does real libtorch DDP
// with the same call.
//
//   example_distributed [--nodes N]                     # 2 worker processes on this machine
//   example_distributed --provider ssh --hosts A,B --identity KEY --known-hosts FILE
//   example_distributed --provider aws --nodes 4        # on EC2, nodes reach each other privately
#include <cstdlib>
#include <example_provider.hpp>
#include <iostream>
#include <set>
#include <sky/sky.hpp>
#include <string>
#include <vector>

namespace train {

// What a rank sees: the framework's variables and sky's own view of the node.
struct Rank {
    std::string master_addr, master_port;
    int rank = -1, world_size = 0, local_rank = -1, node_rank = -1;
    sky::InstanceInfo info;
    std::string jax_coordinator;

    template <class Archive>
    void serialize(Archive& ar) {
        ar(master_addr, master_port, rank, world_size, local_rank, node_rank, info,
           jax_coordinator);
    }
};

std::string env(const char* name) {
    const char* v = std::getenv(name);
    return v ? v : "";
}
int env_int(const char* name) {
    std::string v = env(name);
    return v.empty() ? -1 : std::stoi(v);
}

// In a real program: torch::distributed / c10d init from these variables, then train.
Rank train() {
    Rank r;
    r.master_addr = env("MASTER_ADDR");
    r.master_port = env("MASTER_PORT");
    r.rank = env_int("RANK");
    r.world_size = env_int("WORLD_SIZE");
    r.local_rank = env_int("LOCAL_RANK");
    r.node_rank = env_int("NODE_RANK");
    r.jax_coordinator = env("JAX_COORDINATOR_ADDRESS");
    r.info = sky::instance_info();
    // Lines a function prints come back to the client ("[node N] ..." in the log display).
    std::cout << "node " << r.info.node << " worker " << r.info.worker << ": RANK=" << env("RANK")
              << " WORLD_SIZE=" << env("WORLD_SIZE") << " LOCAL_RANK=" << env("LOCAL_RANK")
              << " LOCAL_WORLD_SIZE=" << env("LOCAL_WORLD_SIZE")
              << " NODE_RANK=" << env("NODE_RANK") << " MASTER_ADDR=" << r.master_addr
              << " MASTER_PORT=" << r.master_port
              << " GLOO_SOCKET_IFNAME=" << env("GLOO_SOCKET_IFNAME")
              << " JAX_COORDINATOR_ADDRESS=" << r.jax_coordinator
              << " JAX_PROCESS_ID=" << env("JAX_PROCESS_ID") << std::endl;
    return r;
}

}  // namespace train

int main(int argc, char** argv) {
    sky::init(argc, argv);  // in a worker process this serves calls and never returns
    try {
        sky::ComputePool pool{{.provider = examples::provider_from_args(argc, argv),
                               .nodes = examples::nodes_from_args(argc, argv, 2)}};

        // "gloo": these nodes have no GPU ("nccl" is the default, for GPUs).
        std::vector<train::Rank> ranks =
            sky::compute<train::train>().with(sky::distributed::torch{.backend = "gloo"}) | pool;

        std::set<std::string> ports;
        bool ok = true;
        for (std::size_t i = 0; i < ranks.size(); ++i) {
            const auto& r = ranks[i];
            std::cout << "rank " << r.rank << " of " << r.world_size << ": node " << r.node_rank
                      << ", local rank " << r.local_rank << ", MASTER_ADDR " << r.master_addr
                      << "\n";
            ports.insert(r.master_port);
            // Results come in rank order; rank = node x workers per node + local rank; the
            // master is the head's private address.
            ok = ok && r.rank == static_cast<int>(i) &&
                 r.world_size == static_cast<int>(ranks.size()) &&
                 r.rank == r.info.node * r.info.workers_per_node + r.info.worker &&
                 r.master_addr == r.info.peers.at(0) && r.master_addr == r.info.head_addr;
        }
        std::cout << "ranks 0.." << ranks.size() - 1
                  << " in order, master is the head: " << (ok ? "yes" : "no") << "\n";
        std::cout << "one MASTER_PORT for every rank: "
                  << (ports.size() == 1 && !ports.begin()->empty() ? "yes" : "no") << "\n";

        // Other frameworks: the same call with another plugin sets their variables instead.
        std::vector<train::Rank> jax =
            sky::compute<train::train>().with(sky::distributed::jax{}) | pool;
        std::cout << "jax coordinator: " << jax.at(0).jax_coordinator << " ("
                  << (jax.at(0).jax_coordinator.rfind(jax.at(0).info.head_addr + ":", 0) == 0
                          ? "the head"
                          : "not the head")
                  << ")\n";

        // Without .with(), a call sees none of these variables.
        train::Rank plain = sky::compute<train::train>() >> pool;
        std::cout << "without .with(): RANK " << (plain.rank == -1 ? "unset" : "set") << "\n";
    } catch (const std::exception& e) {
        std::cerr << "error: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
