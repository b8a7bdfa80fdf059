#pragma once
// Where the pool gets what it needs of the providers without naming one: its backend and a
// provider's own checks of a spec. The registry (src/providers/registry, the composition root
// above the pool and every provider) installs both before a pool is made; the pool sees only
// these two functions, so no include runs from the pool up to the providers.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "pool/backend.hpp"
#include "sky/pool.hpp"

namespace sky::detail {

class Ledger;

/// What a backend is made with.
struct BackendContext {
    const PoolSpec& spec;
    std::string pool_id;
    Ledger* ledger = nullptr;  ///< the pool's write-ahead ledger (may be null: no HOME)
};

/// What the providers give the pool, installed by the registry.
struct ProviderHooks {
    /// The provider's own checks of a spec; appends one message per problem.
    std::function<void(const PoolSpec&, std::vector<std::string>& problems)> validate;
    /// The backend of the spec's provider; throws ConfigError for a provider it cannot make.
    std::function<std::unique_ptr<Backend>(const BackendContext&)> make_backend;
};

/// Installs the providers' hooks (the registry does, before the first pool is made); later
/// installs replace earlier ones.
void install_provider_hooks(ProviderHooks hooks);

/// The backend for a spec's provider (the installed hook); throws ConfigError when no registry
/// was installed, which happens only to a PoolCore made without a backend outside ComputePool.
std::unique_ptr<Backend> make_backend(const BackendContext& context);

/// The provider's own checks of `spec` (the installed hook; none before one is installed).
void validate_provider(const PoolSpec& spec, std::vector<std::string>& problems);

}  // namespace sky::detail
