#include "providers/cloud/sweep.hpp"

#include <algorithm>
#include <thread>

namespace sky::detail {

using Clock = std::chrono::steady_clock;
using State = CloudInstance::State;

SweepResult terminate_and_confirm(MachineInventory& adapter, std::vector<std::string> ids,
                                  const SweepOptions& o) noexcept {
    SweepResult result;
    try {
        if (ids.empty()) return result;
        auto confirmed = [&](const std::string& id) {
            result.gone.push_back(id);
            if (o.on_gone) o.on_gone(id);
        };
        int sent = 0;
        bool need_send = true;
        std::vector<std::string> to_send = ids;
        auto send = [&] {
            ++sent;
            try {
                adapter.terminate(to_send);
                return true;
            } catch (const std::exception& e) {
                result.last_error = e.what();
            } catch (...) {
                result.last_error = "terminate failed";
            }
            return false;
        };
        const auto until = Clock::now() + o.deadline;
        auto pause = std::chrono::milliseconds(200);
        for (int poll = 0; poll < 1000 && !ids.empty(); ++poll) {
            if (need_send && sent < o.tries) need_send = !send();
            try {
                std::vector<std::string> still;
                for (const auto& i : adapter.describe(ids)) {
                    if (std::find(ids.begin(), ids.end(), i.id) == ids.end()) continue;
                    if (i.state == State::gone ||
                        (o.unknown_is_gone && i.state == State::unknown)) {
                        std::erase(ids, i.id);
                        confirmed(i.id);
                    } else if (i.state != State::stopping && i.state != State::unknown) {
                        still.push_back(i.id);  // not on its way out: the terminate was lost
                    }
                }
                if (!still.empty() && !need_send && poll >= 2) {
                    to_send = std::move(still);
                    need_send = true;
                }
            } catch (...) {
                // A passing error: ask again on the next round.
            }
            if (ids.empty() || Clock::now() >= until) break;
            if (need_send && sent >= o.tries && poll > 8) break;  // the cloud keeps refusing
            std::this_thread::sleep_for(std::min<Clock::duration>(until - Clock::now(), pause));
            pause = std::min(pause * 2, std::chrono::milliseconds(5000));
        }
        result.left = std::move(ids);
    } catch (...) {
        // An allocation failure: what was confirmed stays confirmed.
    }
    return result;
}

std::vector<std::string> delete_infra_until_gone(MachineInventory& adapter,
                                                 std::string_view pool_id,
                                                 std::chrono::milliseconds wait,
                                                 std::chrono::milliseconds max_pause) noexcept {
    std::vector<std::string> left;
    try {
        const auto until = Clock::now() + wait;
        // A round that failed for a passing reason (a refused or lost request) is as likely to
        // pass the next time as a firewall is to be free: a pause of a few seconds at most keeps
        // a flaky API from stretching the teardown, and is still few requests for the cloud.
        auto pause = std::min(std::chrono::milliseconds(1000), max_pause);
        for (int round = 0; round < 1000; ++round) {
            adapter.delete_infra(pool_id);
            left = adapter.infra_left(pool_id);
            if (left.empty() || Clock::now() >= until) break;
            std::this_thread::sleep_for(std::min<Clock::duration>(until - Clock::now(), pause));
            pause = std::min(pause * 2, max_pause);
        }
    } catch (...) {
        // An allocation failure: what was left last is the answer.
    }
    return left;
}

}  // namespace sky::detail
