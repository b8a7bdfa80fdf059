#pragma once
// sky::RunPod as a cloud adapter over RunPod's GraphQL API (/graphql): GPU types with their
// prices, on-demand pods (podFindAndDeployOnDemand) and interruptible pods with a bid
// (podRentInterruptable), the pod's SSH endpoint from its runtime ports, podTerminate, and the
// account's pods for the sweep by name.
#include <memory>
#include <string>

#include "sky/cloud.hpp"
#include "sky/providers.hpp"

namespace sky::detail {

/// The base URL when neither RunPod{.endpoint} nor RUNPOD_API_BASE_URL is set: the API host,
/// which serves GraphQL at /graphql (and REST v2 at /v2). RunPod's GraphQL has no version prefix.
inline constexpr const char* kRunPodDefaultUrl = "https://api.runpod.io";

/// An adapter for `config` with the key from RUNPOD_API_KEY (ConfigError when unset).
std::unique_ptr<CloudAdapter> make_runpod_adapter(const RunPod& config);

}  // namespace sky::detail
