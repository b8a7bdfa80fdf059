#pragma once
// What every role of a worker process shares: its messages to the original stderr, the count of
// calls running and when the client was last heard from.
#include <atomic>
#include <chrono>
#include <string>

namespace sky::detail {

/// Seconds on the steady clock.
inline double steady_seconds() {
    using namespace std::chrono;
    return duration<double>(steady_clock::now().time_since_epoch()).count();
}

struct WorkerCore {
    /// Still reaches the original stderr once output capture took fds 1 and 2.
    int err_fd = 2;
    /// Calls running in this process or relayed to its worker processes.
    std::atomic<int> running{0};
    /// steady_seconds() when the client was last heard from.
    std::atomic<double> last_heard{steady_seconds()};

    /// "sky worker PID (node N): msg" on the original stderr.
    void say(const std::string& msg) const;
};

}  // namespace sky::detail
