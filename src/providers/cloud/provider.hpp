#pragma once
// The descriptor of a user's CloudAdapter (sky::CustomCloud) on the cloud layer, as the provider
// registry (src/providers/registry) lists it.
#include "providers/descriptor/descriptor.hpp"

namespace sky::detail {

/// A user's CloudAdapter (sky::CustomCloud): what the pool and `sky doctor` know of it.
ProviderDescriptor custom_provider();

}  // namespace sky::detail
