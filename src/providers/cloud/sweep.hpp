#pragma once
// Ending a pool's cloud resources and confirming they are gone, written once: the pool's
// teardown (CloudBackend) and `sky gc` both use these, so that a machine or a firewall is ended
// the same way whoever ends it.
#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "sky/cloud.hpp"

namespace sky::detail {

/// Deletes a pool's infrastructure (CloudAdapter::delete_infra) until infra_left() names nothing
/// or `wait` has passed, with backoff (1 s, doubling to 10 s) between rounds: a firewall that a
/// machine which has just ended still uses goes a little later. Returns what is still there
/// (empty: all of it is gone). Never throws.
[[nodiscard]] std::vector<std::string> delete_infra_until_gone(
    CloudAdapter& adapter, std::string_view pool_id, std::chrono::milliseconds wait) noexcept;

}  // namespace sky::detail
