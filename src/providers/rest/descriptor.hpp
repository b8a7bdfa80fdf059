#pragma once
// The provider descriptor (providers/registry/registry.hpp) of a REST cloud, made the same way
// for the four (DigitalOcean, Verda, Vast.ai, RunPod): a spec's checks (the cloud's own, then its
// endpoint, then the accelerator a GPU-only cloud needs), the pool's backend on the cloud layer,
// an adapter from the environment and the cloud layer's listing and collection for `sky ls` /
// `sky gc`, and `sky doctor`'s credential status
// from environment variables. Each cloud passes only what is its own.
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "providers/cloud/cloud_backend.hpp"
#include "providers/cloud/collect.hpp"
#include "providers/descriptor/descriptor.hpp"

namespace sky::detail::rest {

/// How a REST cloud is named in its descriptor and in the problems found in a spec.
struct CloudNames {
    std::string_view name;  ///< "vastai": Provider::name(), `--provider`
    std::string display;    ///< "Vast.ai": starts an endpoint's error
    std::string config;     ///< "sky::VastAI": the configuration's type
    /// What a GPU-only cloud rents ("GPU machines"): a pool must name an accelerator or a
    /// machine. Empty: any pool.
    std::string gpu_only = {};
};

/// `sky doctor`'s status of credentials that are environment variables: present when every one
/// of `keys` is set (or `home_file` exists in ~); the base URL from `url_env`, else
/// `default_url`. Never the values, which are only listed as secrets to mask.
std::function<CredentialStatus()> env_credentials(std::vector<const char*> keys,
                                                  const char* url_env, std::string default_url,
                                                  const char* home_file = nullptr);

/// What every REST cloud checks of a spec: `endpoint` when set (check_endpoint), and that a
/// GPU-only cloud's pool names an accelerator or a machine. One message per problem.
void check_spec(const CloudNames& names, const std::string& endpoint, const PoolSpec& spec,
                std::vector<std::string>& problems);

/// The exposure of a cloud whose nodes are containers on shared hosts that map only SSH
/// (RunPod's pods, Vast.ai's instances); `display` names the cloud.
Exposure container_exposure(std::string_view display);

/// The descriptor of the REST cloud whose configuration is `Config` (it has an `endpoint`), with
/// what the cloud states of itself (`facts`); `checks` adds the problems of the cloud's own
/// fields (none: null).
template <class Config>
ProviderDescriptor cloud_descriptor(
    CloudNames names, ProviderFacts facts,
    std::unique_ptr<CloudAdapter> (*make_adapter)(const Config&),
    std::function<void(const Config&, std::vector<std::string>&)> checks,
    std::function<CredentialStatus()> credentials) {
    ProviderDescriptor d(std::move(facts));
    d.validate = [names, checks = std::move(checks)](const PoolSpec& spec,
                                                     std::vector<std::string>& problems) {
        const Config* c = spec.provider.get<Config>();
        if (!c) return;
        if (checks) checks(*c, problems);
        check_spec(names, c->endpoint, spec, problems);
    };
    d.make_backend = [make_adapter](const BackendContext& c) -> std::unique_ptr<Backend> {
        return make_cloud_backend(make_adapter(*c.spec.provider.get<Config>()), c);
    };
    d.credentials = std::move(credentials);
    d.make_adapter = [make_adapter](std::string_view region) -> std::unique_ptr<CloudAdapter> {
        Config c{};
        if constexpr (requires { c.region; })
            if (!region.empty()) c.region = std::string(region);
        return make_adapter(c);
    };
    add_cloud_gc(d);
    return d;
}

}  // namespace sky::detail::rest
