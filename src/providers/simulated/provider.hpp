#pragma once
// sky::Simulated's descriptor, as the provider registry (src/providers/registry) lists it.
#include "providers/descriptor/descriptor.hpp"

namespace sky::detail {

/// sky::Simulated: what the pool, `sky doctor`, `sky ls` and `sky gc` know of it.
ProviderDescriptor simulated_provider();

}  // namespace sky::detail
