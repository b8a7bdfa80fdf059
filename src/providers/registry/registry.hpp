#pragma once
// The provider registry: the list of built-in providers, and the composition root that wires them
// to the pool. It sits above the pool and every provider (it links each of them, see its
// CMakeLists.txt): ComputePool's constructor (compute_pool.cpp, here) passes the pool engine its
// provider (pool_provider: the backend factory and the provider's stated facts), PoolSpec::validate
// (spec.cpp, here) runs the provider's own checks, and the `sky` tool reaches providers only
// through the descriptors listed here. Adding a provider is its folder, one line in registry.cpp
// and one link in this folder's CMakeLists.txt; a sky::Provider alternative with no line there
// does not compile.
#include <string_view>
#include <vector>

#include "providers/descriptor/descriptor.hpp"
#include "sky/providers.hpp"

namespace sky::detail {

/// Every built-in provider, in Provider's order.
const std::vector<ProviderDescriptor>& providers();
/// The descriptor for a name (case-sensitive as Provider::name() spells it); null if unknown.
const ProviderDescriptor* find_provider(std::string_view name);
/// The descriptor that serves a provider configuration (a user's adapter included).
const ProviderDescriptor& descriptor_for(const Provider& provider);
/// What the pool engine is given of `spec`'s provider (PoolCore's constructor): its backend
/// factory and what the provider states of this spec (rendezvous exposure, billing).
PoolProvider pool_provider(const PoolSpec& spec);

}  // namespace sky::detail
