#pragma once
// `sky ls` and `sky gc` for Kubernetes: sky's pods as the cloud layer's machines. A pool's
// ledger records one PoolRef (the kubeconfig path, context and namespace it ran in, and its pool
// id; never a credential), so that `sky gc` deletes a dead pool's ConfigMap and pods with nothing
// but the ledger, through the same kubeconfig the pool used.
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sky/cloud.hpp"

namespace sky::detail::kubernetes {

/// Where a pool ran, as its ledger records it: "kubernetes:<pool id>:<ns>:<context>:<kubeconfig>"
/// (each field percent-encoded; `kubeconfig` the files the pool merged, joined by ':', empty
/// in-cluster).
struct PoolRef {
    std::string pool_id, ns, context, kubeconfig;
    [[nodiscard]] std::string to_string() const;
    static std::optional<PoolRef> parse(const std::string& text);
    /// `kubeconfig` split into its files.
    [[nodiscard]] std::vector<std::filesystem::path> files() const;
};

/// The PoolRefs this machine's pool ledgers record (every pool's, running or not).
std::vector<PoolRef> recorded_refs();

/// The inventory `sky ls` and `sky gc` use: describe() and terminate() take PoolRefs (a pool:
/// its ConfigMap and every pod with its label, in the cluster the ref names) or pod names (where
/// their pool's ledger says it ran, else in the default kubeconfig's context and namespace, with
/// SKY_KUBERNETES_CONTEXT and SKY_KUBERNETES_NAMESPACE); list() lists sky's pods by label there
/// and in every place a ledger of this machine names. No default kubeconfig is needed where the
/// ledgers name readable ones; a recorded kubeconfig that is gone falls back to the
/// environment's with the recorded context, else a ConfigError names both.
std::unique_ptr<MachineInventory> make_inventory();

}  // namespace sky::detail::kubernetes
