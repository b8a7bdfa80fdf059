// sky::Provider's constructors, copies, destruction and accessors (sky/providers.hpp), compiled
// once here rather than in every translation unit that makes a PoolSpec. The config variant
// lives on the heap, so that no program's translation unit compiles it. It is here, beside the
// registry that lists the providers, because it names every provider's configuration type.
#include <utility>

#include "sky/providers.hpp"

namespace sky::inline v0 {

namespace {
const Provider::Config& default_config() noexcept {
    static const Provider::Config local{Local{}};
    return local;
}
}  // namespace

Provider::Provider() : config_(std::make_unique<Config>(Local{})) {}
Provider::Provider(Local c) : config_(std::make_unique<Config>(std::move(c))) {}
Provider::Provider(SSH c) : config_(std::make_unique<Config>(std::move(c))) {}
Provider::Provider(AWS c) : config_(std::make_unique<Config>(std::move(c))) {}
Provider::Provider(RunPod c) : config_(std::make_unique<Config>(std::move(c))) {}
Provider::Provider(VastAI c) : config_(std::make_unique<Config>(std::move(c))) {}
Provider::Provider(Verda c) : config_(std::make_unique<Config>(std::move(c))) {}
Provider::Provider(DigitalOcean c) : config_(std::make_unique<Config>(std::move(c))) {}
Provider::Provider(Simulated c) : config_(std::make_unique<Config>(std::move(c))) {}
Provider::Provider(Slurm c) : config_(std::make_unique<Config>(std::move(c))) {}
Provider::Provider(Kubernetes c) : config_(std::make_unique<Config>(std::move(c))) {}
Provider::Provider(CustomCloud c) : config_(std::make_unique<Config>(std::move(c))) {}
Provider::Provider(const Provider& o) : config_(std::make_unique<Config>(o.config())) {}
Provider::Provider(Provider&& o) noexcept = default;

Provider& Provider::operator=(const Provider& o) {
    if (this != &o) config_ = std::make_unique<Config>(o.config());
    return *this;
}

Provider& Provider::operator=(Provider&& o) noexcept = default;

Provider::~Provider() = default;

const Provider::Config* Provider::config_ptr() const noexcept {
    return config_ ? config_.get() : &default_config();
}

std::string_view Provider::name() const noexcept {
    // Each configuration type names its provider (a static member), a custom cloud by its
    // adapter's name().
    return std::visit([](const auto& c) -> std::string_view { return c.name; }, config());
}

}  // namespace sky::inline v0
