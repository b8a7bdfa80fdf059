#pragma once
// A simulated machine's node: its bootstrap events and its worker process (a LocalWorker).
#include <functional>
#include <memory>

#include "providers/cloud/cloud_backend.hpp"
#include "sky/events.hpp"

namespace sky::detail::simulated {

class SimCloud;

/// Starts machine r.machine's node: the image's bootstrap phases as events (with the boot
/// faults that strike one of them), then its worker process. Throws BootstrapError.
std::unique_ptr<NodeHandle> start_node(const std::shared_ptr<SimCloud>& cloud,
                                       const NodeStartRequest& r,
                                       const std::function<void(Event)>& emit);

}  // namespace sky::detail::simulated
