#pragma once
// sky::DigitalOcean's descriptor, as the provider registry (src/providers/registry) lists it.
#include "providers/descriptor/descriptor.hpp"

namespace sky::detail {

/// sky::DigitalOcean: what the pool, `sky doctor`, `sky ls` and `sky gc` know of it.
ProviderDescriptor digitalocean_provider();

}  // namespace sky::detail
