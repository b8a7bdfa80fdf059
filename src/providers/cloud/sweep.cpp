#include "providers/cloud/sweep.hpp"

#include <algorithm>
#include <thread>

namespace sky::detail {

using Clock = std::chrono::steady_clock;

std::vector<std::string> delete_infra_until_gone(CloudAdapter& adapter, std::string_view pool_id,
                                                 std::chrono::milliseconds wait) noexcept {
    std::vector<std::string> left;
    try {
        const auto until = Clock::now() + wait;
        auto pause = std::chrono::milliseconds(1000);
        for (int round = 0; round < 1000; ++round) {
            adapter.delete_infra(pool_id);
            left = adapter.infra_left(pool_id);
            if (left.empty() || Clock::now() >= until) break;
            std::this_thread::sleep_for(std::min<Clock::duration>(until - Clock::now(), pause));
            pause = std::min(pause * 2, std::chrono::milliseconds(10000));
        }
    } catch (...) {
        // An allocation failure: what was left last is the answer.
    }
    return left;
}

}  // namespace sky::detail
