#pragma once
// sky::SSH's descriptor, as the provider registry (src/providers/registry) lists it.
#include "providers/descriptor/descriptor.hpp"

namespace sky::detail {

/// sky::SSH: what the pool, `sky doctor`, `sky ls` and `sky gc` know of it.
ProviderDescriptor ssh_provider();

}  // namespace sky::detail
