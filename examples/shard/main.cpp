// Data parallelism with a broadcast and sharding (seeds 002, 003: `process_data(list(range(1000)))
// @ pool` with `shard(full_dataset)`; `shard(x_full, y_full, shuffle=True, seed=42)`;
// `DistributedSampler` with `set_epoch`). Every node gets the full data and keeps its own part:
// across nodes the shards are disjoint and together cover every element once.
//
//   example_shard [--nodes N]                           # 3 worker processes on this machine
//   example_shard --provider ssh --hosts A,B --identity KEY --known-hosts FILE
#include <example_provider.hpp>
#include <iostream>
#include <numeric>
#include <set>
#include <sky/sky.hpp>
#include <utility>
#include <vector>

namespace data {

// Each node sums only its shard; the client adds the partial sums.
long process_data(std::vector<long> full_dataset) {
    std::vector<long> local_data = sky::shard(full_dataset);
    return std::accumulate(local_data.begin(), local_data.end(), 0L);
}

// Features and labels sharded with the same (shuffled) indices stay paired: label = 2 * feature.
// Returns how many of this node's pairs still match, and how many it got.
std::pair<long, long> check_pairs(std::vector<long> x_full, std::vector<long> y_full) {
    auto [x_local, y_local] = sky::shard(x_full, y_full, {.shuffle = true, .seed = 42});
    long matching = 0;
    for (std::size_t i = 0; i < x_local.size(); ++i) matching += y_local[i] == 2 * x_local[i];
    return {matching, static_cast<long>(x_local.size())};
}

// The indices of a dataset of `size` that this node visits in `epoch` (as a training loop would).
std::vector<std::size_t> epoch_indices(std::size_t size, int epoch) {
    sky::DistributedSampler sampler{size, {.shuffle = true, .seed = 0}};
    sampler.set_epoch(epoch);  // a different order every epoch, the same on every node
    std::vector<std::size_t> seen;
    for (std::size_t i : sampler) seen.push_back(i);
    return seen;
}

}  // namespace data

int main(int argc, char** argv) {
    sky::init(argc, argv);  // in a worker process this serves calls and never returns
    try {
        sky::ComputePool pool{{.provider = examples::provider_from_args(argc, argv),
                               .nodes = examples::nodes_from_args(argc, argv, 3)}};

        std::vector<long> full(1000);
        std::iota(full.begin(), full.end(), 0L);
        std::vector<long> partial = sky::compute<data::process_data>(full) | pool;
        std::cout << "partial sums:";
        for (long s : partial) std::cout << " " << s;
        std::cout << "\nsum of shards = " << std::accumulate(partial.begin(), partial.end(), 0L)
                  << " (expected 499500)\n";

        std::vector<long> x(100), y(100);
        std::iota(x.begin(), x.end(), 0L);
        for (std::size_t i = 0; i < y.size(); ++i) y[i] = 2 * x[i];
        long matching = 0, total = 0;
        for (auto [m, n] : sky::compute<data::check_pairs>(x, y) | pool) {
            matching += m;
            total += n;
        }
        std::cout << "x/y pairs kept together: " << matching << " of " << total << "\n";

        for (int epoch = 0; epoch < 2; ++epoch) {
            std::vector<std::vector<std::size_t>> per_node =
                sky::compute<data::epoch_indices>(std::size_t{100}, epoch) | pool;
            std::multiset<std::size_t> all;
            for (auto& v : per_node) all.insert(v.begin(), v.end());
            bool once =
                all.size() == 100 && std::set<std::size_t>(all.begin(), all.end()).size() == 100;
            std::cout << "epoch " << epoch
                      << ": samplers cover 0..99 exactly once: " << (once ? "yes" : "no")
                      << ", node 0 starts with " << per_node[0].at(0) << "\n";
        }
    } catch (const std::exception& e) {
        std::cerr << "error: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
