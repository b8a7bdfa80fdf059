#pragma once
// What the pool is given of its provider, without naming one: whoever makes the pool (the
// registry, src/providers/registry, the composition root above the pool and every provider)
// passes it to PoolCore's constructor, from the provider's descriptor. No include runs from the
// pool up to the providers, and nothing is installed in a process-wide slot.
#include <functional>
#include <memory>
#include <string>

#include "catalog/cost.hpp"
#include "pool/backend.hpp"
#include "pool/exposure.hpp"
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

/// A pool's provider as the pool engine sees it: how to make its backend, and the facts the
/// provider states of this spec. Exposure has no default, so neither has this.
struct PoolProvider {
    BackendFactory make_backend;  ///< called once, when the pool starts
    Exposure exposure;            ///< who reaches the nodes' rendezvous ports
    BillingPolicy billing;        ///< how its machines' time is billed
};

}  // namespace sky::detail
