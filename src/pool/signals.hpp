#pragma once
// SIGINT, SIGTERM and SIGHUP in a program that owns pools: every live pool is torn down (in
// parallel), then the signal's default action happens (SIG_DFL restored, the signal raised
// again), so the program ends as it would have without sky, minus the leaked machines. A second
// such signal during the teardown takes its default action at once.
//
// The handler only writes the signal number to a pipe (async-signal-safe); a thread started at
// installation reads it and does the teardown. Installed when the first pool registers, only
// for signals whose disposition is SIG_DFL: SIG_IGN (nohup) and a program's own handler are left
// as they are (that program calls pool.close() from its own shutdown path). Worker processes
// never install it.
#include <memory>

namespace sky::detail {

class PoolCore;

namespace signals {

/// Registers a pool for teardown on a signal; installs the handlers on first use (not in a
/// worker process). Call once the pool has its backend.
void register_pool(const std::weak_ptr<PoolCore>& pool);

/// Marks one close() of `pool` in progress for as long as it lives: a signal's teardown waits
/// for it to end before the signal's default action. The pool is unregistered once no close()
/// is left in progress.
class CloseScope {
public:
    explicit CloseScope(const PoolCore* pool);
    ~CloseScope();
    CloseScope(const CloseScope&) = delete;
    CloseScope& operator=(const CloseScope&) = delete;

private:
    const PoolCore* pool_;
};

/// Whether the handler is installed for this signal (tests; docs).
[[nodiscard]] bool installed(int signal);

}  // namespace signals
}  // namespace sky::detail
