#pragma once
// What a worker process knows about itself; read by sky::instance_info().
#include <atomic>
#include <mutex>

#include "sky/instance.hpp"

namespace sky::detail {

/// Set from the client's hello before any call runs, updated by layout frames (peers, head):
/// read and write it under worker_instance_mutex().
InstanceInfo& worker_instance();
std::mutex& worker_instance_mutex();
/// True in a worker process after the hello.
extern std::atomic<bool> in_worker;
/// The executor slot (0..concurrency-1) of the calling thread (InstanceInfo::worker is the
/// worker process, not the slot).
extern thread_local int worker_slot;

}  // namespace sky::detail
