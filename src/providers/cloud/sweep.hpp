#pragma once
// Ending a pool's cloud resources and confirming they are gone, written once: the pool's
// teardown (CloudBackend) and `sky gc` (collect.cpp) both use these, so that a machine or a
// firewall is ended the same way whoever ends it.
#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "sky/cloud.hpp"

namespace sky::detail {

/// How terminate_and_confirm() ends machines.
struct SweepOptions {
    /// Whether an id the cloud does not know counts as gone (false where the answer may come
    /// from another region than the machine's).
    bool unknown_is_gone = true;
    /// How long to wait for the cloud to confirm (describe polled with backoff, 200 ms doubling
    /// to 5 s).
    std::chrono::milliseconds deadline = std::chrono::minutes(5);
    /// Terminate calls at most: one that failed, or a machine not stopping two polls after it, is
    /// asked again.
    int tries = 4;
    /// Called with each id as soon as it is confirmed gone (the ledger's "gone" record).
    std::function<void(const std::string&)> on_gone;
};

/// What terminate_and_confirm() established.
struct SweepResult {
    std::vector<std::string> gone;  ///< confirmed gone
    std::vector<std::string> left;  ///< not confirmed gone by the deadline
    std::string last_error;         ///< the cloud's last refusal to terminate, if any
};

/// Asks the cloud to end `ids` and describes them until each is gone (or unknown, where that
/// counts as gone), bounded by `options`. A terminate that failed is sent again, a describe that
/// failed is asked again; what is still there at the end is `left` (it carries the pool's tag and
/// is in the ledger: `sky gc`). Never throws.
[[nodiscard]] SweepResult terminate_and_confirm(MachineInventory& inventory,
                                                std::vector<std::string> ids,
                                                const SweepOptions& options) noexcept;

/// Deletes a pool's infrastructure (MachineInventory::delete_infra) until infra_left() names
/// nothing or `wait` has passed, with backoff between rounds (1 s, doubling up to `max_pause`): a
/// firewall that a machine which has just ended still uses goes a little later. Returns what is
/// still there (empty: all of it is gone). Never throws.
[[nodiscard]] std::vector<std::string> delete_infra_until_gone(
    MachineInventory& inventory, std::string_view pool_id, std::chrono::milliseconds wait,
    std::chrono::milliseconds max_pause = std::chrono::seconds(5)) noexcept;

}  // namespace sky::detail
