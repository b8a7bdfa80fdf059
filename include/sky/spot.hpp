#pragma once
/// \file Spot strategies (docs/api.md §8): how many nodes of a pool should run on spot capacity.
#include <chrono>
#include <string>
#include <string_view>
#include <variant>

#include "sky/export.hpp"

SKY_PUBLIC_BEGIN

/// A spot strategy. Implicit from "always", "if-available", "never" and from a fraction (0.8).
struct Spot {
    /// Only spot capacity; retry `retries` times, `interval` apart, before giving up.
    struct Always {
        int retries = 10;
        std::chrono::seconds interval{1};
    };
    /// Spot when there is any, else on-demand.
    struct IfAvailable {};
    /// On-demand only.
    struct Never {};
    /// At least `fraction` of the nodes on spot (rounded up), the rest on-demand.
    struct Percent {
        double fraction = 1.0;
    };
    using Strategy = std::variant<Always, IfAvailable, Never, Percent>;

    Strategy strategy = Always{};

    Spot() = default;
    Spot(Always s) : strategy(s) {}
    Spot(IfAvailable s) : strategy(s) {}
    Spot(Never s) : strategy(s) {}
    Spot(Percent s) : strategy(s) {}
    /// "always", "if-available", "never" (a ConfigError is thrown for anything else).
    Spot(const char* name) : Spot(parse(name)) {}
    Spot(const std::string& name) : Spot(parse(name)) {}
    /// A fraction in [0, 1]: `Percent{f}`.
    Spot(double fraction) : strategy(Percent{fraction}) {}

    /// Parses a strategy name; throws sky::ConfigError naming the bad value.
    static Spot parse(std::string_view name);
    /// The strategy as a user would write it ("always", "if-available", "never", "80%").
    [[nodiscard]] std::string to_string() const;
    /// Checks the values (fraction in [0,1], retries >= 0); throws sky::ConfigError.
    void validate() const;
};

/// Nodes of a pool of `nodes` to start on spot capacity: all for Always and IfAvailable, none for
/// Never, ceil(fraction × nodes) for Percent. Throws sky::ConfigError for invalid values.
[[nodiscard]] int spot_node_count(const Spot& spot, int nodes);
/// Whether a node meant for spot may fall back to on-demand when no spot capacity is found
/// (IfAvailable only; Always retries and then fails, Percent's spot share must be spot).
[[nodiscard]] bool on_demand_fallback(const Spot& spot);
/// Whether the strategy wants any spot capacity (offers are then ranked by spot price).
[[nodiscard]] bool wants_spot(const Spot& spot);

SKY_PUBLIC_END
