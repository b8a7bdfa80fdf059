// The list of built-in providers. Each provider's folder defines its descriptor; this file only
// lists them, so that nothing else in sky names a provider.
#include "providers/registry/registry.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>

#include "util/env.hpp"

namespace sky::detail {

ProviderDescriptor local_provider();         // providers/local
ProviderDescriptor ssh_provider();           // providers/ssh
ProviderDescriptor aws_provider();           // providers/aws
ProviderDescriptor simulated_provider();     // providers/simulated
ProviderDescriptor custom_provider();        // providers/cloud: a user's CloudAdapter
ProviderDescriptor verda_provider();         // providers/verda
ProviderDescriptor vastai_provider();        // providers/vastai
ProviderDescriptor runpod_provider();        // providers/runpod
ProviderDescriptor digitalocean_provider();  // providers/digitalocean

namespace {

// Credentials that are environment variables (or a file in ~), for `sky doctor`.
std::function<CredentialStatus()> env_credentials(std::vector<const char*> keys,
                                                  const char* url_env, std::string default_url,
                                                  const char* home_file = nullptr) {
    return [=] {
        CredentialStatus c;
        c.endpoint = env_or(url_env, default_url);
        bool all = true;
        std::string names;
        for (const char* k : keys) {
            names += (names.empty() ? "" : ", ") + std::string(k);
            if (auto v = env_or(k); !v.empty())
                c.secrets.push_back(v);
            else
                all = false;
        }
        const char* home = std::getenv("HOME");
        if (all) {
            c.present = true;
            c.source = "environment (" + names + ")";
        } else if (home_file && home &&
                   std::filesystem::exists(std::string(home) + "/" + home_file)) {
            c.present = true;
            c.source = std::string("~/") + home_file;
        } else {
            c.source =
                "missing: set " + names + (home_file ? std::string(" or ~/") + home_file : "");
        }
        return c;
    };
}

ProviderDescriptor runpod_with_credentials() {
    ProviderDescriptor d = runpod_provider();
    // RunPod's API host: GraphQL at /graphql (REST v1 at rest.runpod.io is switched off).
    d.credentials =
        env_credentials({"RUNPOD_API_KEY"}, "RUNPOD_API_BASE_URL", "https://api.runpod.io");
    return d;
}

ProviderDescriptor verda_with_credentials() {
    ProviderDescriptor d = verda_provider();
    d.credentials = [] {
        const bool datacrunch = env_or("VERDA_CLIENT_ID").empty() &&
                                !env_or("DATACRUNCH_CLIENT_ID").empty() &&
                                !env_or("DATACRUNCH_CLIENT_SECRET").empty();
        auto keys = datacrunch ? std::vector<const char*>{"DATACRUNCH_CLIENT_ID",
                                                          "DATACRUNCH_CLIENT_SECRET"}
                               : std::vector<const char*>{"VERDA_CLIENT_ID", "VERDA_CLIENT_SECRET"};
        return env_credentials(keys, "VERDA_API_URL", "https://api.verda.com/v1")();
    };
    return d;
}

ProviderDescriptor digitalocean_with_credentials() {
    ProviderDescriptor d = digitalocean_provider();
    d.credentials = env_credentials({"DIGITALOCEAN_TOKEN"}, "DIGITALOCEAN_API_URL",
                                    "https://api.digitalocean.com/v2");
    return d;
}

ProviderDescriptor vastai_with_credentials() {
    ProviderDescriptor d = vastai_provider();  // its validate checks min_reliability
    d.credentials = env_credentials({"VAST_API_KEY"}, "VAST_API_URL",
                                    "https://console.vast.ai/api/v0", ".vast_api_key");
    return d;
}

}  // namespace

const std::vector<ProviderDescriptor>& providers() {
    static const std::vector<ProviderDescriptor> all = {
        local_provider(),
        ssh_provider(),
        aws_provider(),
        runpod_with_credentials(),
        vastai_with_credentials(),
        verda_with_credentials(),
        digitalocean_with_credentials(),
        simulated_provider(),
    };
    return all;
}

const ProviderDescriptor* find_provider(std::string_view name) {
    for (const auto& d : providers())
        if (d.name == name) return &d;
    return nullptr;
}

const ProviderDescriptor& descriptor_for(const Provider& provider) {
    if (provider.get<CustomCloud>()) {
        static const ProviderDescriptor custom = custom_provider();
        return custom;
    }
    const ProviderDescriptor* d = find_provider(provider.name());
    if (!d)
        throw ConfigError(
            fmt::format("PoolSpec::provider: unknown provider '{}'", provider.name()));
    return *d;
}

std::unique_ptr<Backend> make_backend(const BackendContext& context) {
    return descriptor_for(context.spec.provider).make_backend(context);
}

}  // namespace sky::detail
