// Who am I in the pool? (seeds 002, 003: `instance_info()`, and `worker_role()` that answers "I am
// the head node" on node 0.) Inside a compute function, sky::instance_info() describes the node the
// call runs on: its index, the pool's size, whether it is the head (node 0), the head's address,
// the pool's job id, this node's private address and every peer's.
//
//   example_instance_info [--nodes N]                   # 2 worker processes on this machine
//   example_instance_info --provider ssh --hosts A,B --identity KEY --known-hosts FILE
#include <example_provider.hpp>
#include <iostream>
#include <sky/sky.hpp>
#include <string>
#include <vector>

namespace cluster {

std::string worker_role() {
    sky::InstanceInfo info = sky::instance_info();
    if (info.is_head) return "I am the head node";
    return "I am worker " + std::to_string(info.node) + " of " + std::to_string(info.total_nodes);
}

// The whole record, to look at on the client.
sky::InstanceInfo describe() { return sky::instance_info(); }

}  // namespace cluster

int main(int argc, char** argv) {
    sky::init(argc, argv);  // in a worker process this serves calls and never returns
    try {
        // Outside a pool the same call answers for this process: node 0 of 1.
        sky::InstanceInfo here = sky::instance_info();
        std::cout << "in the client: node " << here.node << " of " << here.total_nodes << "\n";

        sky::ComputePool pool{{.provider = examples::provider_from_args(argc, argv),
                               .nodes = examples::nodes_from_args(argc, argv, 2)}};

        std::vector<std::string> roles = sky::compute<cluster::worker_role>() | pool;
        for (std::size_t i = 0; i < roles.size(); ++i)
            std::cout << "node " << i << ": " << roles[i] << "\n";

        std::vector<sky::InstanceInfo> infos = sky::compute<cluster::describe>() | pool;
        bool consistent = true;
        for (const auto& info : infos) {
            std::cout << "node " << info.node << ": head " << (info.is_head ? "yes" : "no")
                      << ", address " << info.private_addr << ", head at " << info.head_addr
                      << ", worker " << info.worker << " of " << info.workers_per_node
                      << ", accelerators " << info.accelerators.size() << "\n";
            // Every node sees the same pool: the same size, head and peer list, and the pool's id.
            consistent = consistent && info.total_nodes == pool.instance_count() &&
                         info.job_id == pool.id() && info.peers == infos[0].peers &&
                         info.peers.size() == infos.size() && info.head_addr == info.peers[0] &&
                         info.private_addr == info.peers.at(static_cast<std::size_t>(info.node));
        }
        std::cout << "every node agrees on the pool (size, job id, head, peers): "
                  << (consistent ? "yes" : "no") << "\n";
    } catch (const std::exception& e) {
        std::cerr << "error: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
