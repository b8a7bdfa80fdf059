#pragma once
// What a worker process knows about itself; read by sky::instance_info().
#include <atomic>

#include "sky/instance.hpp"

namespace sky::detail {

/// Set once from the client's hello before any call runs.
InstanceInfo& worker_instance();
/// True in a worker process after the hello.
extern std::atomic<bool> in_worker;
/// The slot (0..concurrency-1) of the calling thread.
extern thread_local int worker_slot;

}  // namespace sky::detail
