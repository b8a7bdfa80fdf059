#include "runtime/worker_context.hpp"

namespace sky::detail {
std::atomic<bool> in_worker{false};
thread_local int worker_slot = 0;
InstanceInfo& worker_instance() {
    static InstanceInfo info;
    return info;
}
std::mutex& worker_instance_mutex() {
    static std::mutex m;
    return m;
}
}  // namespace sky::detail

namespace sky::inline v0 {
InstanceInfo instance_info() {
    if (!detail::in_worker.load(std::memory_order_acquire)) return InstanceInfo{};
    std::lock_guard lk(detail::worker_instance_mutex());
    return detail::worker_instance();
}
}  // namespace sky::inline v0
