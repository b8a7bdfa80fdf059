// Spot strategies (api.md §8): parsing, printing, validation and the node split.
#include <charconv>
#include <cmath>
#include <cstdio>
#include <sky/errors.hpp>
#include <sky/spot.hpp>
#include <string>
#include <type_traits>

#include "catalog/text.hpp"

namespace sky::inline v0 {
namespace {

std::string format_percent(double fraction) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4g%%", fraction * 100.0);
    return buf;
}

[[noreturn]] void bad_spot(std::string_view value, std::string_view why = {}) {
    std::string msg = "spot: invalid value '" + std::string(value) + "'";
    if (!why.empty()) msg += " (" + std::string(why) + ")";
    const auto near = detail::nearest(value, {"always", "if-available", "never"}, 1);
    if (why.empty() && !near.empty()) msg += "; did you mean \"" + near.front() + "\"?";
    msg +=
        " Expected \"always\", \"if-available\", \"never\", or a fraction such as 0.8 or \"80%\"";
    throw ConfigError(msg);
}

}  // namespace

Spot Spot::parse(std::string_view name) {
    const std::string_view raw = detail::trim(name);
    const std::string s = detail::to_lower(raw);
    if (s == "always" || s == "spot") return Always{};
    if (s == "if-available" || s == "if_available" || s == "ifavailable") return IfAvailable{};
    if (s == "never" || s == "on-demand" || s == "ondemand" || s == "on_demand") return Never{};
    // Numeric shorthands: "0.8" or "80%".
    if (!s.empty() && (std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '.')) {
        const bool percent = s.back() == '%';
        const std::string_view num =
            detail::trim(std::string_view(s).substr(0, s.size() - (percent ? 1 : 0)));
        double v = 0;
        auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), v);
        if (ec != std::errc{} || p != num.data() + num.size()) bad_spot(raw, "not a number");
        if (percent) v /= 100.0;
        Spot out{Percent{v}};
        try {
            out.validate();
        } catch (const ConfigError&) {
            bad_spot(raw, "the spot fraction must be between 0 and 1 (0% to 100%)");
        }
        return out;
    }
    bad_spot(raw);
}

std::string Spot::to_string() const {
    return std::visit(
        [](const auto& s) -> std::string {
            using T = std::decay_t<decltype(s)>;
            if constexpr (std::is_same_v<T, Always>) return "always";
            if constexpr (std::is_same_v<T, IfAvailable>) return "if-available";
            if constexpr (std::is_same_v<T, Never>) return "never";
            if constexpr (std::is_same_v<T, Percent>) return format_percent(s.fraction);
        },
        strategy);
}

void Spot::validate() const {
    if (const auto* a = std::get_if<Always>(&strategy)) {
        if (a->retries < 0)
            throw ConfigError("spot: Always.retries must be >= 0, got " +
                              std::to_string(a->retries));
        if (a->interval.count() < 0)
            throw ConfigError("spot: Always.interval must be >= 0 s, got " +
                              std::to_string(a->interval.count()) + " s");
    }
    if (const auto* p = std::get_if<Percent>(&strategy)) {
        if (!(p->fraction >= 0.0 && p->fraction <= 1.0))  // also rejects NaN
            throw ConfigError("spot: Percent.fraction must be between 0 and 1, got " +
                              std::to_string(p->fraction));
    }
}

int spot_node_count(const Spot& spot, int nodes) {
    spot.validate();
    if (nodes < 0) throw ConfigError("nodes: must be >= 0, got " + std::to_string(nodes));
    if (std::holds_alternative<Spot::Never>(spot.strategy)) return 0;
    if (const auto* p = std::get_if<Spot::Percent>(&spot.strategy)) {
        // Round up ("at least"), tolerating binary fractions such as 0.7 * 10 = 7.000000000000001.
        const double want = p->fraction * nodes;
        return static_cast<int>(std::min<double>(nodes, std::ceil(want - 1e-9)));
    }
    return nodes;
}

bool on_demand_fallback(const Spot& spot) {
    return std::holds_alternative<Spot::IfAvailable>(spot.strategy);
}

bool wants_spot(const Spot& spot) {
    if (std::holds_alternative<Spot::Never>(spot.strategy)) return false;
    if (const auto* p = std::get_if<Spot::Percent>(&spot.strategy)) return p->fraction > 0.0;
    return true;
}

}  // namespace sky::inline v0
