// sky::Provider's constructors, copies and destruction (sky/providers.hpp), compiled once here
// rather than in every translation unit that makes a PoolSpec.
#include <utility>

#include "sky/providers.hpp"

namespace sky {

Provider::Provider() = default;
Provider::Provider(Local c) : config_(std::move(c)) {}
Provider::Provider(SSH c) : config_(std::move(c)) {}
Provider::Provider(AWS c) : config_(std::move(c)) {}
Provider::Provider(RunPod c) : config_(std::move(c)) {}
Provider::Provider(VastAI c) : config_(std::move(c)) {}
Provider::Provider(Verda c) : config_(std::move(c)) {}
Provider::Provider(DigitalOcean c) : config_(std::move(c)) {}
Provider::Provider(Simulated c) : config_(std::move(c)) {}
Provider::Provider(Slurm c) : config_(std::move(c)) {}
Provider::Provider(CustomCloud c) : config_(std::move(c)) {}
Provider::Provider(const Provider&) = default;
Provider::Provider(Provider&&) noexcept = default;
Provider& Provider::operator=(const Provider&) = default;
Provider& Provider::operator=(Provider&&) noexcept = default;
Provider::~Provider() = default;

}  // namespace sky
