#pragma once
// Where the pool gets its backend without naming a provider: the registry (src/providers/registry,
// the composition root above the pool and every provider) installs the factory before a pool is
// made, so no include runs from the pool up to the providers.
#include <functional>
#include <memory>
#include <string>

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

/// Makes the backend of a spec's provider; throws ConfigError for a provider it cannot make.
using BackendFactory = std::function<std::unique_ptr<Backend>(const BackendContext&)>;

/// Installs the factory (the registry does, before the first pool is made); a later install
/// replaces an earlier one.
void install_backend_factory(BackendFactory factory);

/// The backend for a spec's provider (the installed factory); throws ConfigError when none was
/// installed, which happens only to a PoolCore made without a backend outside ComputePool.
std::unique_ptr<Backend> make_backend(const BackendContext& context);

}  // namespace sky::detail
