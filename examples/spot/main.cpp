// Spot strategies (seeds 002, 003): "always", "if-available", "never", a fraction (0.8: at least
// 80% of nodes on spot), or the typed forms sky::Spot::Always{.retries, .interval}, IfAvailable{},
// Never{}, Percent{0.8}. And what seed 000 promises: a reclaimed spot node is detected
// (InstancePreempted) and replaced (InstanceReplaced), and a call that asked for `.retries()`
// re-runs elsewhere instead of failing.
//
// Local and SSH have no spot market, so this example runs on sky::Simulated by default: the
// catalog's offers with a seeded spot market, a capacity shortage and a preemption on cue
// (docs/testing.md), nodes as worker processes on this machine. --provider picks a real cloud,
// where shortages and preemptions happen when they happen.
//
//   example_spot                                        # sky::Simulated
//   example_spot --provider aws
#include <atomic>
#include <chrono>
#include <example_provider.hpp>
#include <iostream>
#include <sky/sky.hpp>
#include <string>
#include <thread>

namespace job {

// A slow step: long enough for the preemption to strike while it runs.
int slow_square(int x) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    return x * x;
}

}  // namespace job

using namespace std::chrono_literals;

int main(int argc, char** argv) {
    sky::init(argc, argv);  // in a worker process this serves calls and never returns
    const bool simulated = examples::flag(argc, argv, "provider").empty();
    // With a real provider the scenario below is up to the cloud.
    auto provider = [&](sky::Simulated scenario) {
        return simulated ? sky::Provider{scenario} : examples::provider_from_args(argc, argv);
    };
    try {
        // The strategies as values: how many of 5 nodes each puts on spot.
        for (sky::Spot s :
             {sky::Spot{"always"}, sky::Spot{"if-available"}, sky::Spot{"never"}, sky::Spot{0.8},
              sky::Spot{sky::Spot::Always{.retries = 3, .interval = 2s}}})
            std::cout << "spot = " << s.to_string() << ": " << sky::spot_node_count(s, 5)
                      << " of 5 nodes on spot\n";

        // A fraction: 1 of 2 nodes on spot, the other on-demand.
        {
            sky::ComputePool pool{{.provider = provider({.seed = 1}),
                                   .nodes = 2,
                                   .accelerator = "T4",
                                   .spot = sky::Spot::Percent{0.5},
                                   .display = sky::Display::quiet}};
            int spot = 0;
            for (const sky::Instance& i : pool.instances()) spot += i.spot;
            std::cout << "spot = 0.5: " << spot << " of " << pool.instance_count()
                      << " nodes on spot\n";
        }

        // "if-available": no spot capacity (the simulated cloud refuses the first launch), so the
        // node falls back to on-demand instead of failing.
        {
            sky::ComputePool pool{{.provider = provider({.capacity_errors = 1, .seed = 1}),
                                   .nodes = 1,
                                   .accelerator = "T4",
                                   .spot = "if-available",
                                   .display = sky::Display::quiet}};
            std::cout << "spot = if-available with no spot capacity: node 0 runs "
                      << (pool.instances().at(0).spot ? "on spot" : "on-demand") << "\n";
        }

        // "always", and node 1 is reclaimed 500 ms after the pool starts, while it works.
        std::atomic<int> preempted{0}, replaced{0};
        {
            sky::ComputePool pool{
                {.provider = provider({.faults = {sky::Fault::preempt(1, 500ms)}, .seed = 1}),
                 .nodes = 2,
                 .accelerator = "T4",
                 .spot = sky::Spot::Always{.retries = 3, .interval = 1s}}};
            pool.on<sky::InstancePreempted>([&](const sky::InstancePreempted& e) {
                std::cout << "preempted: node " << e.node << " (" << e.instance_id << ")"
                          << std::endl;
                ++preempted;
            });
            pool.on<sky::InstanceReplaced>([&](const sky::InstanceReplaced& e) {
                std::cout << "replaced: node " << e.node << ": " << e.old_instance_id << " -> "
                          << e.new_instance_id << std::endl;
                ++replaced;
            });

            // Two slow calls, one per node; the one on node 1 is lost with its machine and, as it
            // asked for retries, runs again on a live node.
            auto [a, b] = (sky::compute<job::slow_square>(3).retries(2) &
                           sky::compute<job::slow_square>(4).retries(2)) >>
                          pool;
            std::cout << "results despite the preemption: " << a << ", " << b << "\n";
            // The replacement machine may still be starting: give it up to 20 s.
            for (int i = 0; simulated && i < 200 && replaced == 0; ++i)
                std::this_thread::sleep_for(100ms);
            std::cout << "nodes after the preemption: " << pool.instance_count() << "\n";
        }
        std::cout << "InstancePreempted events: " << preempted
                  << ", InstanceReplaced events: " << replaced << "\n";
    } catch (const std::exception& e) {
        std::cerr << "error: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
