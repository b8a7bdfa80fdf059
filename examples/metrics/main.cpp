// Resource metrics from every node (seed 002's `Metrics` event; seed 003's
// `pool.on(Metrics, lambda e: print(f"GPU: {e.gpu}%"))`). With `collect_metrics` (the default) each
// worker samples its node's CPU and memory (and, where nvidia-smi exists, its GPUs) and sends them
// as sky::Metrics events; GPU fields are empty on a node without a GPU.
//
// Workers sample every 5 s; SKY_METRICS_INTERVAL_MS changes that (docs/providers.md). This short
// example asks for 200 ms unless the variable is already set.
//
//   example_metrics                                     # 2 worker processes on this machine
//   example_metrics --provider ssh --hosts A,B --identity KEY --known-hosts FILE
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <example_provider.hpp>
#include <iostream>
#include <map>
#include <mutex>
#include <sky/sky.hpp>

namespace job {

// Keeps one core busy for `ms` milliseconds, so the samples have something to show.
long burn(int ms) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    long n = 0;
    while (std::chrono::steady_clock::now() < end) n = (n * 31 + 7) % 1000003;
    return n;
}

}  // namespace job

// What the client keeps per node.
struct NodeStats {
    int samples = 0;
    double peak_cpu = 0;
    double memory_total_mb = 0;
    bool gpu = false;
};

int main(int argc, char** argv) {
    sky::init(argc, argv);  // in a worker process this serves calls and never returns
    try {
        ::setenv("SKY_METRICS_INTERVAL_MS", "200", /*overwrite=*/0);

        std::mutex mutex;
        std::map<int, NodeStats> per_node;
        {
            sky::ComputePool pool{{.provider = examples::provider_from_args(argc, argv),
                                   .nodes = examples::nodes_from_args(argc, argv, 2),
                                   .collect_metrics = true}};
            pool.on<sky::Metrics>([&](const sky::Metrics& m) {
                std::lock_guard lock(mutex);
                NodeStats& s = per_node[m.node];
                ++s.samples;
                s.peak_cpu = std::max(s.peak_cpu, m.cpu_percent);
                s.memory_total_mb = m.memory_total_mb;
                s.gpu = s.gpu || m.gpu_utilization.has_value();
            });

            // One second of work on every node: several samples arrive meanwhile.
            sky::compute<job::burn>(1000) | pool;
        }

        std::lock_guard lock(mutex);
        for (const auto& [node, s] : per_node) {
            std::cout << "node " << node << ": " << s.samples << " samples, peak CPU "
                      << static_cast<int>(s.peak_cpu) << "%, memory "
                      << static_cast<long>(s.memory_total_mb) << " MB, GPU "
                      << (s.gpu ? "yes" : "none") << "\n";
        }
        bool all = per_node.size() >= 1;
        for (const auto& [node, s] : per_node) all = all && s.samples > 0 && s.memory_total_mb > 0;
        std::cout << "metrics from " << per_node.size()
                  << " nodes, each with memory figures: " << (all ? "yes" : "no") << "\n";
    } catch (const std::exception& e) {
        std::cerr << "error: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
