#pragma once
// sky::RunPod's descriptor, as the provider registry (src/providers/registry) lists it.
#include "providers/descriptor/descriptor.hpp"

namespace sky::detail {

/// sky::RunPod: what the pool, `sky doctor`, `sky ls` and `sky gc` know of it.
ProviderDescriptor runpod_provider();

}  // namespace sky::detail
