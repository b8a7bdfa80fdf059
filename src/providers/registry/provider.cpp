// sky::Provider's constructors, copies, destruction and accessors (sky/providers.hpp), compiled
// once here rather than in every translation unit that makes a PoolSpec. The config variant
// lives on the heap, so that no program's translation unit compiles it. It is here, beside the
// registry that lists the providers, because it names every provider's configuration type.
#include <utility>

#include "sky/providers.hpp"

namespace sky {

namespace {
const Provider::Config& default_config() noexcept {
    static const Provider::Config local{Local{}};
    return local;
}
}  // namespace

Provider::Provider() : config_(new Config(Local{})) {}
Provider::Provider(Local c) : config_(new Config(std::move(c))) {}
Provider::Provider(SSH c) : config_(new Config(std::move(c))) {}
Provider::Provider(AWS c) : config_(new Config(std::move(c))) {}
Provider::Provider(RunPod c) : config_(new Config(std::move(c))) {}
Provider::Provider(VastAI c) : config_(new Config(std::move(c))) {}
Provider::Provider(Verda c) : config_(new Config(std::move(c))) {}
Provider::Provider(DigitalOcean c) : config_(new Config(std::move(c))) {}
Provider::Provider(Simulated c) : config_(new Config(std::move(c))) {}
Provider::Provider(Slurm c) : config_(new Config(std::move(c))) {}
Provider::Provider(CustomCloud c) : config_(new Config(std::move(c))) {}
Provider::Provider(const Provider& o) : config_(new Config(o.config())) {}
Provider::Provider(Provider&& o) noexcept : config_(std::exchange(o.config_, nullptr)) {}

Provider& Provider::operator=(const Provider& o) {
    if (this != &o) {
        auto* copy = new Config(o.config());
        delete config_;
        config_ = copy;
    }
    return *this;
}

Provider& Provider::operator=(Provider&& o) noexcept {
    if (this != &o) {
        delete config_;
        config_ = std::exchange(o.config_, nullptr);
    }
    return *this;
}

Provider::~Provider() { delete config_; }

const Provider::Config* Provider::config_ptr() const noexcept {
    return config_ ? config_ : &default_config();
}

std::string_view Provider::name() const noexcept {
    // Each configuration type names its provider (a static member), a custom cloud by its
    // adapter's name().
    return std::visit([](const auto& c) -> std::string_view { return c.name; }, config());
}

}  // namespace sky
