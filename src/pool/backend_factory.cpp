// The providers' hooks, as the registry installed them.
#include "pool/backend_factory.hpp"

#include <mutex>

#include "sky/errors.hpp"

namespace sky::detail {

namespace {

struct Installed {
    std::mutex m;
    ProviderHooks hooks;
};

Installed& installed() {
    static Installed i;
    return i;
}

ProviderHooks current() {
    auto& i = installed();
    std::lock_guard lk(i.m);
    return i.hooks;
}

}  // namespace

void install_provider_hooks(ProviderHooks hooks) {
    auto& i = installed();
    std::lock_guard lk(i.m);
    i.hooks = std::move(hooks);
}

std::unique_ptr<Backend> make_backend(const BackendContext& context) {
    const ProviderHooks hooks = current();
    if (!hooks.make_backend)
        throw ConfigError(
            "PoolSpec::provider: no provider registry is installed in this program (make pools "
            "with sky::ComputePool, which installs it)");
    return hooks.make_backend(context);
}

void validate_provider(const PoolSpec& spec, std::vector<std::string>& problems) {
    const ProviderHooks hooks = current();
    if (hooks.validate) hooks.validate(spec, problems);
}

}  // namespace sky::detail
