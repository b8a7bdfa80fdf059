#pragma once
// One descriptor per provider: everything the rest of sky needs to know of a provider by its
// name. The pool asks it for a backend, PoolSpec::validate for its checks, `sky doctor` for its
// credential status, `sky ls` for the machines it has under sky's tag, `sky gc` to collect what
// a pool that no longer runs left. Adding a provider is one descriptor in registry.cpp's list and
// nothing else outside its folder: the tool never names a provider.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pool/backend.hpp"
#include "sky/cloud.hpp"
#include "sky/pool.hpp"

namespace sky::detail {

class Ledger;
struct LedgerRecord;

/// What a backend is made with.
struct BackendContext {
    const PoolSpec& spec;
    std::string pool_id;
    Ledger* ledger = nullptr;  ///< the pool's write-ahead ledger (may be null: no HOME)
};

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

struct ProviderDescriptor {
    std::string_view name;  ///< as Provider::name() and `--provider` spell it
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

/// Every built-in provider, in Provider's order.
const std::vector<ProviderDescriptor>& providers();
/// The descriptor for a name (case-sensitive as Provider::name() spells it); null if unknown.
const ProviderDescriptor* find_provider(std::string_view name);
/// The descriptor that serves a provider configuration (a user's adapter included).
const ProviderDescriptor& descriptor_for(const Provider& provider);
/// The backend for a spec's provider; throws ConfigError for providers this build lacks.
std::unique_ptr<Backend> make_backend(const BackendContext& context);

}  // namespace sky::detail
