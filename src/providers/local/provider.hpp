#pragma once
// sky::Local's descriptor, as the provider registry (src/providers/registry) lists it.
#include "providers/descriptor/descriptor.hpp"

namespace sky::detail {

/// sky::Local: what the pool, `sky doctor`, `sky ls` and `sky gc` know of it.
ProviderDescriptor local_provider();

}  // namespace sky::detail
