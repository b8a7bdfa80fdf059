#pragma once
// What a distributed call exposes (security review r4 H1): the frameworks' rendezvous services
// (PyTorch's TCPStore and gloo/NCCL, JAX's coordinator, TensorFlow's task servers) authenticate
// nobody, and whoever can connect to them can, by those projects' own words, run code as the
// job's user. Where sky makes the machines on a cloud with a firewall (AWS's security group,
// DigitalOcean's cloud firewall, Verda's host firewall) only the pool's own machines can; on
// the other providers sky cannot close the network, and the pool says so once, when its first
// distributed call starts.
#include <functional>
#include <string>

#include "sky/events.hpp"
#include "sky/pool.hpp"

namespace sky::detail {

/// What a distributed call exposes on `spec`'s provider, as one sentence; empty where the pool's
/// network admits only its own machines.
[[nodiscard]] std::string distributed_exposure(const PoolSpec& spec);

/// The once-per-pool notice: when distributed_exposure(spec) says something, prints it on stderr
/// ("sky: notice: ...") and emits it as an ErrorEvent. The pool calls it when its first call
/// with a distributed plugin starts (PoolCore::submit).
void notice_distributed_exposure(const PoolSpec& spec, const std::function<void(Event)>& emit);

}  // namespace sky::detail
