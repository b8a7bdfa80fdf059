#pragma once
// Call execution in a worker process: the queue of calls, the executor threads that run them
// (never the reading thread, so heartbeats, cancels and a vanished client are seen while calls
// run) and one call's run from its frame to its result or error frame.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <span>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "runtime/capture.hpp"
#include "runtime/protocol.hpp"
#include "runtime/rendezvous.hpp"
#include "runtime/worker/core.hpp"
#include "runtime/worker/outbox.hpp"

namespace sky::detail {

/// The frame of an error answer to call `id`.
Buffer error_frame(std::uint64_t id, const ErrorMsg& e);

class Executor {
public:
    /// The rendezvous variables of a distributed call (throws sky::Error when it cannot run).
    using PluginEnv = std::function<EnvVars(const CallPlugin&)>;

    Executor(WorkerCore& core, Outbox& out, OutputCapture& capture, PluginEnv plugin_env);
    ~Executor() { stop(); }
    Executor(const Executor&) = delete;
    Executor& operator=(const Executor&) = delete;

    /// Starts `threads` executor threads.
    void start(int threads);
    /// Queues the call of frame `f` (its payload is taken); false, and nothing queued, when a
    /// call of that id is queued or running already (a call id never runs twice).
    bool submit(Frame& f);
    /// Wakes idle executor threads for the calls submit() queued: the reader calls it when it
    /// has handled every frame it read, before it waits for more.
    void kick();
    /// The calls that said "started" and have not answered yet, in id order.
    [[nodiscard]] std::vector<std::uint64_t> started() const;
    /// Drops call `id` if it has not started (queued, or an at-most-once call waiting for its
    /// confirm); its answer is then a "cancelled" error.
    void cancel(std::uint64_t id);
    /// The client counts at-most-once call `id` as started: it may run now.
    void confirm(std::uint64_t id);
    /// In a resumable session a call id stays known after its answer, until the client
    /// acknowledges it (forget()): a call frame sent again after a resume, which races with
    /// the call's end, then never runs it a second time.
    void keep_answered(bool on);
    /// The client acknowledged these calls' answers.
    void forget(std::span<const std::uint64_t> call_ids);
    /// Drops what waits, lets the running calls finish and joins the threads.
    void stop();

private:
    struct Job {
        std::uint64_t id = 0;
        Buffer payload;
        std::uint16_t flags = 0;
    };
    /// What waits for its confirm: confirmed, or dropped (cancelled, stopping).
    enum class Confirm { waiting, confirmed, dropped };

    /// A call's answer frame, and the result bytes its function handed over (they follow it).
    struct Answer {
        Buffer frame;
        OwnedBytes tail;
    };
    void run(int slot);
    Answer execute(const Job& j);
    /// Tells the client the call starts; for an at-most-once call, waits for its confirm.
    /// False when the call must not run.
    bool announce(const Job& j);
    /// The "cancelled before it started" answer to call `id`.
    void send_cancelled(std::uint64_t id);

    WorkerCore& core_;
    Outbox& out_;
    OutputCapture& capture_;
    PluginEnv plugin_env_;
    std::vector<std::thread> threads_;
    mutable std::mutex m_;
    std::condition_variable cv_;          // a call was queued, or stop
    std::condition_variable confirm_cv_;  // a confirm or cancel arrived, or stop
    std::deque<Job> queue_;
    /// queue_.size(), read without the lock (whether an answer may wait for the next ones).
    std::atomic<std::size_t> queued_{0};
    int idle_ = 0;  ///< executor threads waiting for a call
    /// Queued calls that wake an idle executor before the reader's kick().
    static constexpr std::size_t kick_at = 8;
    std::unordered_map<std::uint64_t, Confirm> confirms_;  // at-most-once calls announced
    std::unordered_set<std::uint64_t> known_;  // queued or running (or answered, keep_answered_)
    bool keep_answered_ = false;
    std::unordered_set<std::uint64_t> started_;  // announced, not answered
    bool stop_ = false;
};

}  // namespace sky::detail
