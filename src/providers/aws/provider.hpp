#pragma once
// sky::AWS's descriptor, as the provider registry (src/providers/registry) lists it.
#include "providers/descriptor/descriptor.hpp"

namespace sky::detail {

/// sky::AWS: what the pool, `sky doctor`, `sky ls` and `sky gc` know of it.
ProviderDescriptor aws_provider();

}  // namespace sky::detail
