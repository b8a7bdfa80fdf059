#pragma once
// One descriptor per provider: everything the rest of sky needs to know of a provider by its
// name. The pool asks it for a backend, PoolSpec::validate for its checks, `sky doctor` for its
// credential status, `sky ls` / `sky gc` for an adapter that lists and collects its machines.
// Adding a provider is one descriptor in registry.cpp's list and nothing else outside its folder.
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

struct ProviderDescriptor {
    std::string_view name;  ///< as Provider::name() and `--provider` spell it
    /// Provider-specific checks of a spec; appends one message per problem.
    std::function<void(const PoolSpec&, std::vector<std::string>& problems)> validate;
    /// The pool's backend (throws ConfigError on missing credentials).
    std::function<std::unique_ptr<Backend>(const BackendContext&)> make_backend;
    /// Credential status for `sky doctor` (null: needs none).
    std::function<CredentialStatus()> credentials;
    /// An adapter with the default configuration from the environment, for `sky ls` and
    /// `sky gc` (null: the provider has no machines to list, e.g. Local and SSH).
    std::function<std::unique_ptr<CloudAdapter>()> make_adapter;
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
