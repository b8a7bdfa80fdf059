#pragma once
// `sky ls` and `sky gc` for Kubernetes: sky's pods as the cloud layer's machines. A pool's
// ledger records one PoolRef (the kubeconfig path, context and namespace it ran in, and its pool
// id; never a credential), so that `sky gc` deletes a dead pool's ConfigMap and pods with nothing
// but the ledger, through the same kubeconfig the pool used.
#include <memory>
#include <optional>
#include <string>

#include "sky/cloud.hpp"

namespace sky::detail::kubernetes {

/// Where a pool ran, as its ledger records it: "kubernetes:<pool id>:<ns>:<context>:<kubeconfig>"
/// (each field percent-encoded).
struct PoolRef {
    std::string pool_id, ns, context, kubeconfig;
    [[nodiscard]] std::string to_string() const;
    static std::optional<PoolRef> parse(const std::string& text);
};

/// The inventory `sky ls` and `sky gc` use: describe() and terminate() take PoolRefs (a pool:
/// its ConfigMap and every pod with its label, in the cluster the ref names) or pod names (in
/// the default kubeconfig's context and namespace, with SKY_KUBERNETES_CONTEXT and
/// SKY_KUBERNETES_NAMESPACE); list() lists sky's pods there by label.
std::unique_ptr<MachineInventory> make_inventory();

}  // namespace sky::detail::kubernetes
