// sky::MultiPool's threads (sky/pool.hpp): its pools are started and torn down in parallel here,
// so that the public header holds no std::thread.
#include <exception>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "sky/pool.hpp"

namespace sky::detail {

std::vector<ComputePool> make_pools(std::vector<PoolSpec> specs) {
    const std::size_t n = specs.size();
    std::vector<std::optional<ComputePool>> made(n);
    std::vector<std::exception_ptr> errors(n);
    std::vector<std::thread> threads;
    threads.reserve(n);
    try {
        for (std::size_t i = 0; i < n; ++i)
            threads.emplace_back([&, i] {
                try {
                    made[i].emplace(std::move(specs[i]));
                } catch (...) {
                    errors[i] = std::current_exception();
                }
            });
    } catch (...) {
        // No thread for the rest: what started is torn down below like a failed pool.
        for (std::size_t i = threads.size(); i < n; ++i) errors[i] = std::current_exception();
    }
    for (auto& t : threads) t.join();
    std::vector<ComputePool> pools;
    pools.reserve(n);
    for (auto& m : made)
        if (m) pools.push_back(std::move(*m));
    for (auto& e : errors)
        if (e) {
            tear_down_pools(pools);
            std::rethrow_exception(e);
        }
    return pools;
}

void tear_down_pools(std::vector<ComputePool>& pools) noexcept {
    std::vector<std::thread> threads;
    try {
        threads.reserve(pools.size());
    } catch (...) {
    }
    for (auto& p : pools) {
        try {
            threads.emplace_back([q = std::move(p)]() mutable { ComputePool gone{std::move(q)}; });
        } catch (...) {
            // No thread: this pool ends here, with the vector.
        }
    }
    for (auto& t : threads) t.join();
    pools.clear();
}

}  // namespace sky::detail
