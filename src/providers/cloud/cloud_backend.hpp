#pragma once
// The one implementation of a cloud pool's life, over a CloudAdapter (sky/cloud.hpp): offers,
// launch rounds with the spot strategy, per-node host keys, waiting until machines run, bootstrap
// through RemoteNode, replacement of lost nodes, terminate-and-confirm, the stop sweep by tag.
// Every cloud (AWS, a user's adapter, ...) runs through this code; none has launch or teardown
// logic of its own.
#include <memory>

#include "pool/backend.hpp"
#include "providers/descriptor/descriptor.hpp"
#include "sky/cloud.hpp"

namespace sky::detail {

/// What starting a launched machine's worker needs.
struct NodeStartRequest {
    int node = 0;
    CloudInstance machine;  ///< as describe() saw it running (id, addresses, spot, pinned key)
    Offer offer;
    const PoolSpec* spec = nullptr;
    std::string pool_id;
};

/// Turns a running machine into a started node (bootstrap and worker). Empty: over SSH with the
/// machine's pinned host key (RemoteNode), as on every real cloud.
using NodeStarter = std::function<std::unique_ptr<NodeHandle>(
    const NodeStartRequest&, const std::function<void(Event)>& emit)>;

/// A backend for `context.spec` over `adapter`.
std::unique_ptr<Backend> make_cloud_backend(std::unique_ptr<CloudAdapter> adapter,
                                            const BackendContext& context,
                                            NodeStarter starter = {});

}  // namespace sky::detail
