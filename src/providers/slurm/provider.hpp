#pragma once
// sky::Slurm's descriptor, as the provider registry (src/providers/registry) lists it.
#include "providers/descriptor/descriptor.hpp"

namespace sky::detail {

/// sky::Slurm: what the pool, `sky doctor`, `sky ls` and `sky gc` know of it.
ProviderDescriptor slurm_provider();

}  // namespace sky::detail
