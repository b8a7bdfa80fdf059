// The list of built-in providers. Each provider's folder defines its descriptor (declared in its
// provider.hpp, linked in CMakeLists.txt); this file only lists them, so that nothing else in sky
// names a provider.
#include "providers/registry/registry.hpp"

#include <fmt/format.h>

#include <mutex>

#include "providers/aws/provider.hpp"
#include "providers/cloud/provider.hpp"
#include "providers/digitalocean/provider.hpp"
#include "providers/local/provider.hpp"
#include "providers/runpod/provider.hpp"
#include "providers/simulated/provider.hpp"
#include "providers/slurm/provider.hpp"
#include "providers/ssh/provider.hpp"
#include "providers/vastai/provider.hpp"
#include "providers/verda/provider.hpp"

namespace sky::detail {

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

void install_registry() {
    static std::once_flag once;
    std::call_once(once, [] {
        install_backend_factory([](const BackendContext& context) {
            return descriptor_for(context.spec.provider).make_backend(context);
        });
    });
}

namespace {
// Also at start-up, for pools made without ComputePool (tests that build a PoolCore themselves):
// this object is linked wherever PoolSpec::validate or descriptor_for is.
[[maybe_unused]] const bool installed_at_start = (install_registry(), true);
}  // namespace

}  // namespace sky::detail
