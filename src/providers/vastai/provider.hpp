#pragma once
// sky::VastAI's descriptor, as the provider registry (src/providers/registry) lists it.
#include "providers/descriptor/descriptor.hpp"

namespace sky::detail {

/// sky::VastAI: what the pool, `sky doctor`, `sky ls` and `sky gc` know of it.
ProviderDescriptor vastai_provider();

}  // namespace sky::detail
