#pragma once
// The worker's background threads: the watchdog, which ends the process when its client is gone
// or its time is up (even while a call runs), the metrics sampler, the progress sender and the
// forwarder of the node's preemption notices.
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "runtime/worker/core.hpp"
#include "runtime/worker/outbox.hpp"

namespace sky::detail {

class Background {
public:
    struct Limits {
        long parent_pid = 0;  ///< > 0: exit when this process is no longer the parent
        std::chrono::seconds idle_timeout{600};
        std::chrono::seconds hard_timeout{3600};
    };

    explicit Background(WorkerCore& core) : core_(core) {}
    ~Background() { stop(); }
    Background(const Background&) = delete;
    Background& operator=(const Background&) = delete;

    /// Starts the watchdog.
    void start_watchdog(const Limits& limits);
    /// Starts sampling CPU, memory and GPUs every `interval` into `writer`.
    void start_metrics(Outbox& out, std::chrono::milliseconds interval);
    /// Sends the latest sky::progress step to the client within `period` of each change while
    /// calls run, and "none" once no call runs after one reported (api.md §10a).
    void start_progress(Outbox& out, std::chrono::milliseconds period);
    /// Watches the launcher's notice file (runtime/preemption.hpp, NodeNotice): a notice it
    /// holds goes to the client within `period` of being written, and again every few seconds
    /// while it stands (a frame written while the connection was down is dropped; the client
    /// keeps one notice per machine, so a repeat costs nothing there).
    void start_notices(Outbox& out, std::string file, std::chrono::milliseconds period);
    /// Ends the threads at once (they wait on a condition variable) and joins them.
    void stop();

private:
    /// Sleeps for `d` unless told to stop; true when told.
    bool stopped_within(std::chrono::milliseconds d);
    void watchdog(Limits limits);
    void metrics(Outbox& out, std::chrono::milliseconds interval);
    void progress(Outbox& out, std::chrono::milliseconds period);
    void notices(Outbox& out, const std::string& file, std::chrono::milliseconds period);

    WorkerCore& core_;
    // Joined by stop(): they read the worker's objects, which end when it returns (a detached
    // thread went on using its mutexes as the process exited; TSan saw it).
    std::thread watchdog_;
    std::thread metrics_;
    std::thread progress_;
    std::thread notices_;
    std::mutex m_;
    std::condition_variable cv_;
    bool stop_ = false;  // under m_
};

}  // namespace sky::detail
