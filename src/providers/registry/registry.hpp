#pragma once
// The provider registry: the list of built-in providers, and the composition root that wires them
// to the pool. It sits above the pool and every provider (it links each of them, see its
// CMakeLists.txt): the pool gets its backend through the factory the registry installs
// (pool/backend_factory.hpp), PoolSpec::validate (spec.cpp, here) runs the provider's own
// checks, and the `sky` tool reaches providers only through the descriptors listed here. Adding a
// provider is its folder, one line in registry.cpp and one link in this folder's CMakeLists.txt.
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
/// Installs the registry's backend factory in the pool (idempotent; every ComputePool does it
/// first).
void install_registry();

}  // namespace sky::detail
