// Batch inference on an elastic pool (api.md §4a): the pool starts with no node, wakes on the
// first batch, grows with the backlog up to `max`, gives back idle nodes after the window and
// sleeps at zero between batches, within a spending limit.
//
//   example_elastic                               # worker processes on this machine
//   example_elastic --provider simulated          # a simulated cloud, billed per second
#include <atomic>
#include <chrono>
#include <example_provider.hpp>
#include <iostream>
#include <set>
#include <sky/sky.hpp>
#include <thread>
#include <vector>

namespace job {

// A stand-in for a model's forward pass: 50 ms per document.
double embed(int doc) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return doc * 0.5;
}

int node_of(int) { return sky::instance_info().node; }

}  // namespace job

int main(int argc, char** argv) {
    sky::init(argc, argv);  // in a worker process this serves calls and never returns
    using namespace std::chrono_literals;
    try {
        std::atomic<int> max_seen{0};
        sky::ComputePool pool{{
            .provider = examples::provider_from_args(argc, argv),
            .nodes = 0,  // a lazy start: no node until the first call
            .display = sky::Display::quiet,
            .autoscale = {.min = 0, .max = 4, .scaledown_window = 2s},
            .budget = {.max_total_usd = 5.0, .max_hourly_usd = 10.0},
        }};
        pool.on<sky::PoolScaled>([&](const sky::PoolScaled& e) {
            if (e.to > max_seen) max_seen = e.to;
            std::cout << "scaled " << e.from << " -> " << e.to << " (" << e.reason << ")\n";
        });
        std::cout << "before the first batch: " << pool.instance_count() << " nodes\n";

        std::vector<int> docs(200);
        for (int i = 0; i < 200; ++i) docs[static_cast<std::size_t>(i)] = i;
        const auto embeddings = sky::map<job::embed>(docs).chunk(5) >> pool;
        std::cout << "batch 1: " << embeddings.size() << " embeddings, the last "
                  << embeddings.back() << "; at most " << max_seen << " nodes\n";

        // Idle: the pool gives its nodes back and sleeps at zero.
        for (int i = 0; i < 200 && pool.instance_count() > 0; ++i)
            std::this_thread::sleep_for(100ms);
        std::cout << "between batches: " << pool.instance_count() << " nodes\n";

        // The next batch wakes it again, node 0 first.
        const int first = sky::compute<job::node_of>(0) >> pool;
        std::cout << "batch 2 woke node " << first << "\n";

        // By hand: new bounds (keep one node warm from now on), two nodes now, then node 1 out
        // once its calls are done.
        pool.resize(sky::Autoscale{.min = 1, .max = 4, .scaledown_window = 2s});
        pool.resize(2).get();
        std::cout << "after resize(2): " << pool.instance_count() << " nodes\n";
        pool.drain(1).get();
        std::cout << "after drain(1): " << pool.instance_count() << " nodes\n";
        std::cout << "spent $" << pool.cost() << " of a $5.00 budget\n";
    } catch (const sky::Error& e) {
        std::cerr << "error: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
