#pragma once
// The worker process's session with its client: it ties the roles together (connection, call
// execution, per-GPU worker processes, watchdog and metrics) for the life of the process. A
// worker that listens for its client (SSH and cloud nodes) keeps its session when the
// connection drops: its calls run on, their answers are kept, and a connection that
// authenticates and resumes the same session within the client's bound gets them.
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>

#include "runtime/capture.hpp"
#include "runtime/protocol.hpp"
#include "runtime/rendezvous.hpp"
#include "runtime/worker/connection.hpp"
#include "runtime/worker/core.hpp"
#include "runtime/worker/executor.hpp"
#include "runtime/worker/listener.hpp"
#include "runtime/worker/node_worker.hpp"
#include "runtime/worker/outbox.hpp"
#include "runtime/worker/watchdog.hpp"
#include "runtime/worker_launch.hpp"

namespace sky::detail {

class Worker final : public FrameHandler {
public:
    /// Serves the authenticated connection `fd`. `listener` (null for a Local worker, whose
    /// socketpair has none) is where a dropped client may come back, proving it holds `token`.
    Worker(int fd, const WorkerLaunch& launch, std::unique_ptr<Listener> listener,
           std::string token, const std::optional<io::SealKeys>& keys = std::nullopt);
    ~Worker() override;
    Worker(const Worker&) = delete;
    Worker& operator=(const Worker&) = delete;

    /// Serves until the client says shutdown or goes away for good; the process exit code.
    int run();

private:
    void on_call(Frame& f) override;
    void on_frames_taken() override;
    void on_cancel(std::uint64_t call_id) override;
    void on_confirm(std::uint64_t call_id) override;
    void on_ack(std::span<const std::uint64_t> call_ids) override;
    void on_layout(std::span<const std::byte> payload) override;
    void on_preempt(std::span<const std::byte> payload) override;

    /// Reads the client's hello, plans the worker processes and answers "ready".
    bool handshake();
    /// After the connection dropped: waits up to the client's bound for a connection that
    /// resumes this session, and serves it from where the last one ended. False when none came.
    bool resume();
    /// While the session may be resumed: accepts whoever comes to the listener, and hands a
    /// connection that authenticates and resumes this session to resume(), ending the current
    /// one (which may look alive here long after the client lost it: a silent cut).
    void door();
    /// Stops the door thread (idempotent).
    void close_door();
    /// Calls that said "started" and have not answered yet.
    std::vector<std::uint64_t> started_calls() const;
    /// Stops the calls, the worker processes and the background threads; flushes.
    void finish();
    /// For the node's watchdog (a separate process): the file's mtime is when the client was
    /// last heard from. Touched at most once a second.
    void touch_heartbeat();
    EnvVars plugin_env(const CallPlugin& plugin);

    WorkerCore core_;
    std::unique_ptr<Connection> conn_;
    Outbox out_;
    std::unique_ptr<Listener> listener_;
    std::string token_;  // while a dropped client may come back
    long parent_pid_;
    std::string heartbeat_file_;
    std::string notice_file_;  // the launcher's notices (empty: none comes)
    double last_touch_ = 0;
    int concurrency_ = 1;
    Background::Limits limits_;
    std::uint64_t max_frame_ = default_max_frame;
    bool collect_metrics_ = false;
    std::chrono::milliseconds metrics_interval_{5000};
    std::string session_;
    std::chrono::seconds reconnect_bound_{0};
    WorkerReady ready_;
    std::unique_ptr<OutputCapture> capture_;
    NodeWorker node_;
    std::unique_ptr<Executor> executor_;
    Background background_;
    std::mutex layout_m_;
    PoolLayout layout_;  // under layout_m_
    std::string interface_;
    std::thread door_;
    std::mutex door_m_;
    std::condition_variable door_cv_;
    std::unique_ptr<Connection> comeback_;  // under door_m_: a resuming connection, handed over
    bool door_closed_ = false;              // under door_m_
    int door_wake_ = -1;                    // eventfd: close_door() stops the door's wait
};

/// Serves calls on the connected, authenticated descriptor `fd` (see Worker); returns the
/// process exit code.
int run_worker(int fd, const WorkerLaunch& launch, std::unique_ptr<Listener> listener,
               std::string token, const std::optional<io::SealKeys>& keys = std::nullopt);

}  // namespace sky::detail
