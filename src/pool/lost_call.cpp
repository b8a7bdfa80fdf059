#include "pool/lost_call.hpp"

#include <algorithm>

namespace sky::detail {

void mark_crash_started(Scheduler& sched, int node, const NodeExit& ex) {
    if (!ex.crash) return;
    for (auto id : ex.crash->running) sched.mark_started(node, id);
    if (ex.crash->call_id) sched.mark_started(node, ex.crash->call_id);
}

std::exception_ptr lost_call_error(int node, const std::string& instance_id, const NodeExit& ex,
                                   const Task& t) {
    NodeLostError::Call c;
    c.function = std::string(t.call.function);
    c.started = t.started;
    c.remote_log = t.log_tail;
    if (const auto& crash = ex.crash) {
        c.signal = crash->signal;
        c.stack = crash->stack;
        const bool here = crash->call_id == t.call_id;
        // A crash outside any call (the worker's own threads) is no other call's either.
        c.crashed_elsewhere = !here && crash->call_id != 0;
        if (here) {
            // What it wrote just before it died and that the worker had not sent yet.
            c.remote_log.insert(c.remote_log.end(), crash->output.begin(), crash->output.end());
            constexpr std::size_t keep = 20;
            if (c.remote_log.size() > keep)
                c.remote_log.erase(c.remote_log.begin(),
                                   c.remote_log.end() - static_cast<std::ptrdiff_t>(keep));
        }
    }
    return std::make_exception_ptr(
        NodeLostError(node, instance_id, ex.reason, ex.detail, std::move(c)));
}

}  // namespace sky::detail
