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
    // With autoscaling, 0 <= min <= nodes <= max (nodes = 0: a lazy start); without, nodes >= 1.
    const Autoscale& a = autoscale;
    if (a.max < 0 || a.max > 4096)
        bad(fmt::format("autoscale.max must be in [0, 4096] (0: autoscaling off), got {}", a.max));
    if (a.max == 0 && a.min != 0)
        bad(fmt::format("autoscale.min is {} but autoscale.max is 0 (autoscaling off): set max",
                        a.min));
    if (a.max > 0) {
        if (a.min < 0) bad(fmt::format("autoscale.min must be at least 0, got {}", a.min));
        if (a.min > a.max)
            bad(fmt::format("autoscale.min ({}) is more than autoscale.max ({})", a.min, a.max));
        if (nodes < 0) bad(fmt::format("nodes must be at least 0, got {}", nodes));
        if (nodes < a.min)
            bad(fmt::format("nodes ({}) is less than autoscale.min ({})", nodes, a.min));
        if (nodes > a.max)
            bad(fmt::format("nodes ({}) is more than autoscale.max ({})", nodes, a.max));
        if (a.scaledown_window.count() < 0)
            bad(fmt::format("autoscale.scaledown_window must not be negative, got {} s",
                            a.scaledown_window.count()));
    } else if (nodes == 0) {
        bad("nodes is 0 (a lazy start) but autoscale.max is 0: a lazy pool needs autoscale "
            "bounds to wake with");
    } else if (nodes < 1 || nodes > 4096) {
        bad(fmt::format("nodes must be in [1, 4096], got {}", nodes));
    }
    // NaN compares false everywhere: !(x >= 0) catches it.
    if (!(budget.max_total_usd >= 0))
        bad(fmt::format("budget.max_total_usd must be at least 0 (0: none), got {}",
                        budget.max_total_usd));
    if (!(budget.max_hourly_usd >= 0))
        bad(fmt::format("budget.max_hourly_usd must be at least 0 (0: none), got {}",
                        budget.max_hourly_usd));
    if (!(budget.warn_at > 0 && budget.warn_at <= 1))
        bad(fmt::format("budget.warn_at must be in (0, 1], got {}", budget.warn_at));
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
