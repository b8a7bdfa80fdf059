#pragma once
// One worker process of this executable on this machine, connected to the client by a
// socketpair: a sky::Local node, and the machine of a sky::Simulated node. It is the one place
// that starts such a process (its environment without provider credentials, its token), tells
// why it ended (waitpid) and stops it.
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "pool/backend.hpp"

namespace sky::detail {

/// SKY_LOCAL_SEAL=1: Local workers seal their socket pair's stream as a Slurm worker seals its
/// network stream (runtime/auth.hpp, io/sealed.hpp), so that the cipher's cost and behaviour are
/// measured and tested on the same path as an unsealed pool (bench/seal, tests). Off by default:
/// a socket pair crosses no network.
bool local_seal();

class LocalWorker final : public NodeHandle {
public:
    /// Starts a worker for `spec` (its env and its image's env) in `workdir` (empty: the
    /// client's); its environment names `pool_id` (SKY_PARENT_POOL, when not empty), which is
    /// what lets `sky gc` prove a leftover worker is that pool's. Throws sky::Error when the
    /// process cannot be started.
    LocalWorker(const PoolSpec& spec, std::string workdir, std::string pool_id = {});
    /// Stops the worker (stop()).
    ~LocalWorker() override;
    LocalWorker(const LocalWorker&) = delete;
    LocalWorker& operator=(const LocalWorker&) = delete;

    /// The client's end of the socketpair of the latest start; once per start (the worker
    /// serves one connection). Throws sky::Error when it was taken already.
    std::unique_ptr<io::Stream> connect_worker() override;
    [[nodiscard]] const std::string& token() const noexcept override { return token_; }
    /// Ends the current process if it still runs, then starts a fresh one with a new token.
    void restart_worker(const std::function<void(Event)>& emit) override;
    /// Why the process ended, from its exit status (waits up to 2 s for it to exit) and, when a
    /// signal killed it in a call, its crash report.
    NodeExit exit_reason() override;
    /// This machine is always there.
    [[nodiscard]] bool reachable() const override { return true; }
    /// Gives the worker 1.5 s to exit (the pool asked it to shut down), then kills it.
    void stop() noexcept override;

    /// The current process id; -1 once it was reaped.
    [[nodiscard]] int pid() const;
    /// Sends `sig` to the current process unless it was reaped already (a reaped pid may belong
    /// to another process by now). Returns whether it was sent.
    bool signal(int sig);
    /// Stops several workers within one grace period of 1.5 s, then kills what is left.
    static void stop_all(std::span<LocalWorker* const> workers) noexcept;

private:
    void start();                          // under m_
    bool reap_locked(bool wait) noexcept;  // waitpid; true when reaped
    void kill_locked() noexcept;           // SIGKILL and reap

    PoolSpec spec_;
    std::string workdir_;
    std::string pool_id_;
    mutable std::mutex m_;
    int pid_ = -1;
    int status_ = 0;
    bool reaped_ = true;
    std::string token_;
    std::unique_ptr<io::Stream> pending_;  // the client's end, until connect_worker()
    /// A private directory (0700) for the worker's crash file; removed by the destructor.
    std::string crash_dir_;
};

/// Whether an environment variable holds a compute provider's credentials (or says where to
/// find them): a worker on this machine runs the user's functions, none of which needs sky's
/// cloud access.
bool is_provider_credential(std::string_view name);

}  // namespace sky::detail
