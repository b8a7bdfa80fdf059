#pragma once
// What a provider is to the rest of sky: one descriptor per provider, everything sky needs to know
// of a provider by its name. The pool gets its backend and its checks from it (through the
// registry, src/providers/registry, which wires the descriptors to the pool), `sky doctor` its
// credential status, `sky ls` the machines it has under sky's tag, `sky gc` a way to collect what
// a pool that no longer runs left. Each provider's folder defines its descriptor (declared in its
// provider.hpp); this header is the vocabulary they share, below the registry that lists them.
#include <concepts>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "catalog/cost.hpp"
#include "pool/backend.hpp"
#include "pool/backend_factory.hpp"
#include "pool/exposure.hpp"
#include "sky/cloud.hpp"
#include "sky/pool.hpp"

namespace sky::detail {

struct LedgerRecord;

/// Where a provider's credentials come from, for `sky doctor`; never their values.
struct CredentialStatus {
    bool present = false;
    std::string
        source;  ///< "AWS_ACCESS_KEY_ID", "~/.aws/credentials [default]", or what is missing
    std::string endpoint;              ///< the base URL requests go to (empty: none, e.g. Local)
    std::vector<std::string> secrets;  ///< values to mask if they ever show up in an error
};

/// What `sky ls` and `sky gc` ask a provider for: its machines under sky's tag.
struct MachineQuery {
    std::string region;         ///< "": the provider's default (from the environment)
    bool include_gone = false;  ///< also machines the cloud still shows as ended
};

/// A provider's answer to a MachineQuery.
struct Machines {
    std::string region;  ///< where it looked ("" where the cloud places machines)
    std::vector<CloudInstance> machines;
};

/// One pool `sky gc` hands its provider to collect: its machines end, its infrastructure goes,
/// its ledger is closed.
struct GcPool {
    const LedgerRecord* record = nullptr;  ///< null: a pool with no ledger here (--include-unknown)
    std::string pool_id;
    std::string label;                  ///< how gc names the pool in what it says
    std::vector<std::string> machines;  ///< ids to end: the ledger's live ones and the tagged ones
};

/// How `sky gc` runs and where it reports.
struct GcOptions {
    bool dry_run = false;                          ///< say what would be done, change nothing
    std::function<void(const std::string&)> say;   ///< what was done (stdout)
    std::function<void(const std::string&)> fail;  ///< what could not be done (stderr, exit 1)
};

/// A fact a provider must state: it has no default constructor, so a ProviderFacts that leaves
/// it out does not compile.
template <class T>
struct Stated {
    Stated() = delete;
    template <class U>
    requires std::constructible_from<T, U> Stated(U&& v) : value(std::forward<U>(v)) {}
    T value;
};

/// What a provider says of itself that the rest of sky acts on. Every field is Stated: adding a
/// provider means answering each of them.
struct ProviderFacts {
    /// Who besides the pool's own machines reaches its nodes' rendezvous ports, for a spec.
    Stated<std::function<Exposure(const PoolSpec&)>> exposure;
    /// How its machines' time is billed (increment, minimum), from the provider's own terms.
    Stated<BillingPolicy> billing;
    /// Its nodes are processes on this machine: they share its file system and mount nothing.
    Stated<bool> runs_on_this_machine;
};

/// The exposure of a provider whose nodes are processes on this machine: every other user of it
/// reaches their ports.
Exposure this_machine_exposure();

/// One provider as the pool, `sky doctor`, `sky ls` and `sky gc` see it.
struct ProviderDescriptor {
    /// A descriptor starts from what the provider states of itself.
    explicit ProviderDescriptor(ProviderFacts f) : facts(std::move(f)) {}

    /// As Provider::name() and `--provider` spell it: the registry sets it from the
    /// configuration type's `name`.
    std::string_view name;
    ProviderFacts facts;
    /// Provider-specific checks of a spec; appends one message per problem.
    std::function<void(const PoolSpec&, std::vector<std::string>& problems)> validate;
    /// The pool's backend (throws ConfigError on missing credentials).
    std::function<std::unique_ptr<Backend>(const BackendContext&)> make_backend;
    /// Credential status for `sky doctor` (null: needs none).
    std::function<CredentialStatus()> credentials;
    /// A cloud's adapter with the default configuration from the environment, in `region`
    /// ("": the default), for its `list_machines` and `collect` (null: not a cloud).
    std::function<std::unique_ptr<CloudAdapter>(std::string_view region)> make_adapter;
    /// Its machines under sky's tag, for `sky ls` and `sky gc`; throws ConfigError when it
    /// cannot be asked (no credentials) and what the cloud throws (null: nothing to list).
    std::function<Machines(const MachineQuery&)> list_machines;
    /// Collects pools that no longer run (`sky gc`): ends their machines, deletes their
    /// infrastructure, records that in their ledgers (null: gc cannot reach this provider).
    std::function<void(std::vector<GcPool> pools, const GcOptions&)> collect;
};

}  // namespace sky::detail
