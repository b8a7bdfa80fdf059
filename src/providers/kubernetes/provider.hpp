#pragma once
// sky::Kubernetes's descriptor, as the provider registry (src/providers/registry) lists it.
#include "providers/descriptor/descriptor.hpp"

namespace sky::detail {

/// sky::Kubernetes: what the pool, `sky doctor`, `sky ls` and `sky gc` know of it.
ProviderDescriptor kubernetes_provider();

}  // namespace sky::detail
