// SKY_SIMULATED: a simulated cloud's capacity errors and faults from the environment, so that a
// test switches them on without recompiling. Strict: an unknown key or a key the fault's kind does
// not take is an error (a typo must not silently turn a fault off).
#include <fmt/format.h>

#include <cstdlib>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "providers/simulated/simulated.hpp"
#include "sky/errors.hpp"

namespace sky::detail {

namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& what) {
    throw ConfigError(fmt::format("{}: {}", simulated_env, what));
}

// A wrong value as the message shows it: a scalar's text cut to 64 characters, an array or
// object only by its kind and size (no recursive dump of whatever a variable holds).
std::string shown(const json& v) {
    if (v.is_array()) return fmt::format("an array of {}", v.size());
    if (v.is_object()) return fmt::format("an object of {} keys", v.size());
    std::string s = v.dump();
    if (s.size() > 64) s = s.substr(0, 64) + "...";
    return s;
}

std::int64_t integer(const json& v, const std::string& where, std::int64_t lo, std::int64_t hi) {
    if (!v.is_number_integer() && !v.is_number_unsigned())
        bad(fmt::format("{} must be an integer, got {}", where, shown(v)));
    if (v.is_number_unsigned() &&
        v.get<std::uint64_t>() >
            static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        bad(fmt::format("{} must be in [{}, {}], got {}", where, lo, hi, shown(v)));
    const std::int64_t x = v.get<std::int64_t>();
    if (x < lo || x > hi) bad(fmt::format("{} must be in [{}, {}], got {}", where, lo, hi, x));
    return x;
}

Fault parse_fault(const json& f, std::size_t index) {
    const std::string at = fmt::format("faults[{}]", index);
    if (!f.is_object()) bad(fmt::format("{} must be an object, got {}", at, shown(f)));
    if (!f.contains("kind") || !f["kind"].is_string())
        bad(
            fmt::format("{} needs \"kind\": one of preempt, lose, lose_after_calls, "
                        "fail_bootstrap, slow_bootstrap, freeze",
                        at));
    const std::string kind = f["kind"].get<std::string>();
    static const std::pair<const char*, Fault::Kind> kinds[] = {
        {"preempt", Fault::Kind::preempt},
        {"lose", Fault::Kind::lose},
        {"lose_after_calls", Fault::Kind::lose_after_calls},
        {"fail_bootstrap", Fault::Kind::fail_bootstrap},
        {"slow_bootstrap", Fault::Kind::slow_bootstrap},
        {"freeze", Fault::Kind::freeze}};
    Fault out;
    bool known = false;
    for (auto& [name, k] : kinds)
        if (kind == name) {
            out.kind = k;
            known = true;
        }
    if (!known)
        bad(
            fmt::format("{}: unknown kind \"{}\" (one of preempt, lose, lose_after_calls, "
                        "fail_bootstrap, slow_bootstrap, freeze)",
                        at, kind));
    // The key each kind takes besides "kind" and "node".
    const char* extra = nullptr;
    switch (out.kind) {
        case Fault::Kind::preempt:
        case Fault::Kind::lose:
        case Fault::Kind::freeze:
            extra = "after_ms";
            break;
        case Fault::Kind::lose_after_calls:
            extra = "calls";
            break;
        case Fault::Kind::fail_bootstrap:
            extra = "message";
            break;
        case Fault::Kind::slow_bootstrap:
            extra = "delay_ms";
            break;
    }
    for (auto it = f.begin(); it != f.end(); ++it)
        if (it.key() != "kind" && it.key() != "node" && it.key() != extra &&
            !(out.kind == Fault::Kind::preempt && it.key() == "notice_ms"))
            bad(fmt::format("{} ({}): unknown key \"{}\" (it takes kind, node and {}{})", at, kind,
                            it.key(), extra,
                            out.kind == Fault::Kind::preempt ? ", and notice_ms" : ""));
    if (!f.contains("node")) bad(fmt::format("{} ({}) needs \"node\"", at, kind));
    out.node = static_cast<int>(integer(f["node"], at + ".node", 0, 4095));
    if (!f.contains(extra)) bad(fmt::format("{} ({}) needs \"{}\"", at, kind, extra));
    const json& v = f[extra];
    constexpr std::int64_t day_ms = 24LL * 3600 * 1000;
    switch (out.kind) {
        case Fault::Kind::preempt:
        case Fault::Kind::lose:
        case Fault::Kind::freeze:
            out.after = std::chrono::milliseconds(integer(v, at + ".after_ms", 0, day_ms));
            if (out.kind == Fault::Kind::preempt && f.contains("notice_ms"))
                out.notice = std::chrono::milliseconds(
                    integer(f["notice_ms"], at + ".notice_ms", 0, day_ms));
            break;
        case Fault::Kind::lose_after_calls:
            out.calls = static_cast<int>(integer(v, at + ".calls", 1, 1'000'000'000));
            break;
        case Fault::Kind::fail_bootstrap:
            if (!v.is_string())
                bad(fmt::format("{}.message must be a string, got {}", at, shown(v)));
            out.message = v.get<std::string>();
            break;
        case Fault::Kind::slow_bootstrap:
            out.delay = std::chrono::milliseconds(integer(v, at + ".delay_ms", 0, day_ms));
            break;
    }
    return out;
}

}  // namespace

std::string_view fault_kind_name(Fault::Kind kind) noexcept {
    switch (kind) {
        case Fault::Kind::preempt:
            return "preempt";
        case Fault::Kind::lose:
            return "lose";
        case Fault::Kind::lose_after_calls:
            return "lose_after_calls";
        case Fault::Kind::fail_bootstrap:
            return "fail_bootstrap";
        case Fault::Kind::slow_bootstrap:
            return "slow_bootstrap";
        case Fault::Kind::freeze:
            return "freeze";
    }
    return "?";
}

Simulated with_simulated_env(const Simulated& base, const char* text) {
    if (!text) text = std::getenv(simulated_env);
    Simulated out = base;
    if (!text) return out;
    const std::string_view sv(text);
    if (sv.find_first_not_of(" \t\r\n") == std::string_view::npos) return out;
    json j;
    try {
        j = json::parse(sv);
    } catch (const json::parse_error& e) {
        // nlohmann's message names the byte where parsing stopped; the value itself holds no
        // secret (it is a test's fault list) but is not repeated: it may be long.
        bad(fmt::format("not valid JSON: {}", e.what()));
    }
    if (!j.is_object())
        bad(
            fmt::format("must be a JSON object like {{\"capacity_errors\":2,\"faults\":[...]}}, "
                        "got {}",
                        j.type_name()));
    for (auto it = j.begin(); it != j.end(); ++it)
        if (it.key() != "capacity_errors" && it.key() != "faults" && it.key() != "seed")
            bad(fmt::format("unknown key \"{}\" (it takes capacity_errors, faults and seed)",
                            it.key()));
    if (j.contains("capacity_errors"))
        out.capacity_errors =
            static_cast<int>(integer(j["capacity_errors"], "capacity_errors", 0, 1'000'000'000));
    if (j.contains("seed")) {
        const json& s = j["seed"];
        if (!s.is_number_unsigned() && !(s.is_number_integer() && s.get<std::int64_t>() >= 0))
            bad(fmt::format("seed must be a non-negative integer, got {}", shown(s)));
        out.seed = s.get<std::uint64_t>();
    }
    if (j.contains("faults")) {
        const json& fs = j["faults"];
        if (!fs.is_array()) bad(fmt::format("faults must be an array, got {}", fs.type_name()));
        for (std::size_t i = 0; i < fs.size(); ++i) out.faults.push_back(parse_fault(fs[i], i));
    }
    return out;
}

void check_simulated(const Simulated& c, int nodes, std::vector<std::string>& problems) {
    if (c.capacity_errors < 0)
        problems.push_back(
            fmt::format("provider: sky::Simulated capacity_errors must not be negative, got {}",
                        c.capacity_errors));
    for (std::size_t i = 0; i < c.faults.size(); ++i) {
        const Fault& f = c.faults[i];
        const auto what =
            fmt::format("provider: sky::Simulated faults[{}] ({})", i, fault_kind_name(f.kind));
        if (f.node < 0 || f.node >= nodes)
            problems.push_back(fmt::format("{} names node {}, but the pool's nodes are 0 to {}",
                                           what, f.node, nodes - 1));
        if (f.after.count() < 0)
            problems.push_back(
                fmt::format("{}: after must not be negative, got {} ms", what, f.after.count()));
        if (f.delay.count() < 0)
            problems.push_back(
                fmt::format("{}: delay must not be negative, got {} ms", what, f.delay.count()));
        if (f.notice.count() < 0)
            problems.push_back(
                fmt::format("{}: notice must not be negative, got {} ms", what, f.notice.count()));
        if (f.notice.count() > 0 && f.kind != Fault::Kind::preempt)
            problems.push_back(fmt::format("{}: only a preempt fault gives a notice", what));
        if (f.notice > f.after)
            problems.push_back(fmt::format(
                "{}: the notice ({} ms) must not be longer than after ({} ms): the warning "
                "would come before the pool started",
                what, f.notice.count(), f.after.count()));
        if (f.kind == Fault::Kind::lose_after_calls && f.calls < 1)
            problems.push_back(
                fmt::format("{}: the number of calls must be at least 1, got {}", what, f.calls));
    }
}

}  // namespace sky::detail
