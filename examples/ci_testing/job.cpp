#include "job.hpp"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <ostream>
#include <thread>

namespace job {

long score(int item) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // some work
    return static_cast<long>(item) * item;
}

long score_chunk(std::vector<int> chunk) {
    long sum = 0;
    for (int item : chunk) sum += score(item);
    return sum;
}

Result run(sky::ComputePool& pool, int items) {
    // Small chunks, each retried twice on another node: a reclaimed spot node costs one
    // chunk's work, not the run.
    constexpr int chunk = 8;
    std::vector<sky::PendingCompute<long>> calls;
    for (int first = 0; first < items; first += chunk) {
        std::vector<int> part;
        for (int i = first; i < std::min(items, first + chunk); ++i) part.push_back(i);
        calls.push_back(sky::compute<score_chunk>(std::move(part)).retries(2));
    }
    std::vector<long> sums = sky::gather(std::move(calls)) >> pool;
    return {std::accumulate(sums.begin(), sums.end(), 0L), items};
}

int main_with(sky::PoolSpec spec, int items, std::ostream& out) {
    try {
        sky::ComputePool pool{std::move(spec)};
        const Result r = run(pool, items);
        out << "scored " << r.items << " items, total " << r.total << "\n";
        return 0;
    } catch (const sky::ProvisionError& e) {
        out << "no capacity: tried " << e.attempts().size() << " offers\n";
        return 2;
    } catch (const sky::BootstrapError& e) {
        out << "node " << e.node() << " could not be set up (" << e.phase() << ")\n";
        return 3;
    } catch (const sky::NodeLostError& e) {
        out << "node " << e.node() << " was lost: " << e.reason_name(e.reason()) << "\n";
        return 4;
    } catch (const sky::ConfigError& e) {
        out << e.what() << "\n";
        return 1;
    }
}

}  // namespace job
