#include "runtime/worker_context.hpp"

namespace sky::detail {
std::atomic<bool> in_worker{false};
thread_local int worker_slot = 0;
InstanceInfo& worker_instance() {
    static InstanceInfo info;
    return info;
}
}  // namespace sky::detail

namespace sky {
InstanceInfo instance_info() {
    if (!detail::in_worker.load(std::memory_order_acquire)) return InstanceInfo{};
    InstanceInfo i = detail::worker_instance();
    i.worker = detail::worker_slot;
    return i;
}
}  // namespace sky
