// The list of built-in providers. Each provider's folder defines its descriptor; this file only
// lists them, so that nothing else in sky names a provider.
#include "providers/registry/registry.hpp"

#include <fmt/format.h>

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
ProviderDescriptor slurm_provider();         // providers/slurm

const std::vector<ProviderDescriptor>& providers() {
    static const std::vector<ProviderDescriptor> all = {
        local_provider(),        ssh_provider(),       aws_provider(),
        runpod_provider(),       vastai_provider(),    verda_provider(),
        digitalocean_provider(), simulated_provider(), slurm_provider(),
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
