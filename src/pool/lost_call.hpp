#pragma once
// The error of a call lost with its node: NodeLostError with what the pool knows of the call
// (whether it started, what it printed) and what the node's crash report says (the signal, the
// crashing thread's stack, the output that had not reached the client).
#include <exception>
#include <string>

#include "pool/backend.hpp"
#include "pool/scheduler.hpp"

namespace sky::detail {

/// Marks started the calls the crash report names as running on `node` (a "started" frame
/// may not have left the worker before it died).
void mark_crash_started(Scheduler& sched, int node, const NodeExit& ex);

/// The NodeLostError of task `t`, lost with node `node` (`instance_id`) as `ex` says.
std::exception_ptr lost_call_error(int node, const std::string& instance_id, const NodeExit& ex,
                                   const Task& t);

}  // namespace sky::detail
