#pragma once
// sky::Verda's descriptor, as the provider registry (src/providers/registry) lists it.
#include "providers/descriptor/descriptor.hpp"

namespace sky::detail {

/// sky::Verda: what the pool, `sky doctor`, `sky ls` and `sky gc` know of it.
ProviderDescriptor verda_provider();

}  // namespace sky::detail
