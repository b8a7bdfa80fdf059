// PoolSpec::validate: every field checked, the first bad one named with its value. It lives in the
// composition root because its last check is the provider's own (its descriptor's): whoever
// validates a spec, the pool before it starts included, has every provider's checks.
#include <fmt/format.h>

#include <regex>

#include "providers/registry/registry.hpp"
#include "sky/errors.hpp"
#include "sky/pool.hpp"
#include "volumes/volumes.hpp"

namespace sky::inline v0 {

namespace {
bool valid_env_name(const std::string& k) {
    static const std::regex re("[A-Za-z_][A-Za-z0-9_]*");
    return std::regex_match(k, re);
}
}  // namespace

void PoolSpec::validate() const {
    auto bad = [](const std::string& m) { throw ConfigError("PoolSpec::" + m); };
    if (nodes < 1 || nodes > 4096) bad(fmt::format("nodes must be in [1, 4096], got {}", nodes));
    if (concurrency < 1 || concurrency > 1024)
        bad(fmt::format("concurrency must be in [1, 1024], got {}", concurrency));
    if (timeout.count() <= 0)
        bad(fmt::format("timeout must be positive, got {} s", timeout.count()));
    if (idle_timeout.count() <= 0)
        bad(fmt::format("idle_timeout must be positive, got {} s", idle_timeout.count()));
    if (cpu && *cpu < 1) bad(fmt::format("cpu must be at least 1, got {}", *cpu));
    if (memory) {
        try {
            (void)parse_memory_gb(*memory, "memory");
        } catch (const ConfigError& e) {
            bad(e.what());
        }
    }
    if (machine && machine->empty()) bad("machine is set but empty");
    if (accelerator && accelerator->count < 1)
        bad(fmt::format("accelerator count must be at least 1, got {}", accelerator->count));
    for (auto& [k, v] : env)
        if (!valid_env_name(k)) bad(fmt::format("env has an invalid variable name \"{}\"", k));
    {
        std::vector<std::string> problems;
        detail::check_volumes(volumes, problems);
        // Nodes that are processes on this machine cannot mount.
        if (detail::descriptor_for(provider).facts.runs_on_this_machine.value)
            detail::refuse_volumes_on_this_machine(
                volumes, fmt::format("the {} provider", provider.name()), problems);
        if (!problems.empty()) bad(problems.front());
    }
    try {
        image.validate();
        spot.validate();
    } catch (const ConfigError& e) {
        bad(e.what());
    }
    // The provider's own checks (its descriptor).
    std::vector<std::string> problems;
    const auto& descriptor = detail::descriptor_for(provider);
    if (descriptor.validate) descriptor.validate(*this, problems);
    if (!problems.empty()) bad(problems.front());
}

}  // namespace sky::inline v0
