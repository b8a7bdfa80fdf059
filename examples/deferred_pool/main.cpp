// Configure now, provision later (seed 003: `pool = ComputePool(...)` built first, `with pool:`
// later). In C++ the configuration is a value, sky::PoolSpec, that can be built, checked, copied
// and passed around without starting anything; the pool starts when a ComputePool is made from it,
// and ends when that leaves its scope (or at close()). std::optional holds a pool that does not
// exist yet.
//
//   example_deferred_pool                               # 2 worker processes on this machine
//   example_deferred_pool --provider ssh --hosts A,B --identity KEY --known-hosts FILE
#include <example_provider.hpp>
#include <iostream>
#include <optional>
#include <sky/sky.hpp>
#include <string>
#include <utility>

namespace job {

int answer(int x) { return x + 40; }

}  // namespace job

// Making the pool where it is needed, and handing it back: a ComputePool is movable.
sky::ComputePool start_pool(const sky::PoolSpec& spec) { return sky::ComputePool{spec}; }

int main(int argc, char** argv) {
    sky::init(argc, argv);  // in a worker process this serves calls and never returns
    try {
        // The plan: nothing is provisioned yet, and mistakes show up now, not after a launch.
        sky::PoolSpec spec{.provider = examples::provider_from_args(argc, argv),
                           .nodes = examples::nodes_from_args(argc, argv, 2),
                           .timeout = std::chrono::minutes{10},
                           .concurrency = 2};
        spec.validate();
        std::cout << "planned: " << spec.nodes << " nodes on " << spec.provider.name() << "\n";

        sky::PoolSpec bad = spec;
        bad.concurrency = 0;
        try {
            bad.validate();
        } catch (const sky::ConfigError& e) {
            std::cout << "a bad plan is refused before anything starts: " << e.what() << "\n";
        }

        std::optional<sky::ComputePool> pool;
        std::cout << "pool exists: " << (pool ? "yes" : "no") << "\n";

        pool.emplace(spec);  // provisions now
        std::cout << "pool exists: yes, active: " << (pool->is_active() ? "yes" : "no") << ", "
                  << pool->instance_count() << " instances\n";
        std::cout << "answer(2) >> pool = " << (sky::compute<job::answer>(2) >> *pool) << "\n";

        const std::string first_id = pool->id();
        pool->close();  // tears down now, and says if something could not be stopped
        std::cout << "after close(): active: " << (pool->is_active() ? "yes" : "no") << "\n";
        pool.reset();

        // The same plan again, started by a helper that returns the pool.
        sky::ComputePool second = start_pool(spec);
        std::cout << "second pool: answer(1) = " << (sky::compute<job::answer>(1) >> second)
                  << ", a new pool id: " << (second.id() != first_id ? "yes" : "no") << "\n";
    } catch (const std::exception& e) {
        std::cerr << "error: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
