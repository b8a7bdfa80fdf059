// The backend factory, as the registry installed it.
#include "pool/backend_factory.hpp"

#include <mutex>

#include "sky/errors.hpp"

namespace sky::detail {

namespace {

struct Installed {
    std::mutex m;
    BackendFactory factory;
};

Installed& installed() {
    static Installed i;
    return i;
}

}  // namespace

void install_backend_factory(BackendFactory factory) {
    auto& i = installed();
    std::lock_guard lk(i.m);
    i.factory = std::move(factory);
}

std::unique_ptr<Backend> make_backend(const BackendContext& context) {
    BackendFactory factory;
    {
        auto& i = installed();
        std::lock_guard lk(i.m);
        factory = i.factory;
    }
    if (!factory)
        throw ConfigError(
            "PoolSpec::provider: no provider registry is installed in this program (make pools "
            "with sky::ComputePool, which installs it)");
    return factory(context);
}

}  // namespace sky::detail
