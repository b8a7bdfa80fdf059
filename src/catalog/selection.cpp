// Instance selection: which offers meet a request, cheapest first, and why none do.
// The rule is documented in include/sky/catalog.hpp.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <set>
#include <sky/catalog.hpp>
#include <sky/errors.hpp>

#include "catalog/names.hpp"
#include "catalog/text.hpp"

namespace sky::inline v0 {
namespace {

constexpr double kTolerance = 0.01;  // GB; absorbs rounding in the data

std::string fmt_num(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
}

std::string fmt_price(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "$%.4g/h", v);
    return buf;
}

bool needs_spot_market(const Spot& spot) {
    if (std::holds_alternative<Spot::Always>(spot.strategy)) return true;
    if (const auto* p = std::get_if<Spot::Percent>(&spot.strategy)) return p->fraction > 0.0;
    return false;
}

// A request with its strings parsed once.
struct Prepared {
    const SelectionRequest& req;
    std::optional<std::string> family;  // canonical accelerator name
    int count = 0;
    std::optional<double> gpu_memory;
    std::optional<double> memory;
    bool spot_market = false;
    bool by_spot = false;

    explicit Prepared(const SelectionRequest& r) : req(r) {
        r.spot.validate();
        spot_market = needs_spot_market(r.spot);
        by_spot = wants_spot(r.spot);
        if (r.accelerator) {
            const auto& a = *r.accelerator;
            family = detail::canonical_accelerator_name(a.name).value_or(a.name);
            count = a.count;
            if (count < 1)
                throw ConfigError("accelerator: count must be >= 1, got " + std::to_string(count));
            if (a.memory) gpu_memory = parse_memory_gb(*a.memory, "accelerator memory");
        }
        if (r.cpu && *r.cpu < 0)
            throw ConfigError("cpu: must be >= 0, got " + std::to_string(*r.cpu));
        if (r.memory) memory = parse_memory_gb(*r.memory, "memory");
    }
};

std::string offer_accel(const Offer& o) {
    if (o.accelerator.empty()) return "no accelerator";
    return std::to_string(o.accelerator_count) + "x " + o.accelerator + " " +
           fmt_num(o.gpu_memory_gb) + "GB";
}

std::string describe(const Offer& o) {
    return o.provider + " " + o.instance_type + (o.region.empty() ? "" : " in " + o.region) + " (" +
           offer_accel(o) + ", " + std::to_string(o.vcpus) + " vCPU, " + fmt_num(o.memory_gb) +
           " GB, " + fmt_price(o.on_demand_price) + ")";
}

// One requirement: whether it applies, whether an offer passes, and how to word a failure.
struct Stage {
    const char* name;
    std::function<bool(const Prepared&)> applies;
    std::function<bool(const Prepared&, const Offer&)> pass;
    std::function<std::string(const Prepared&)> requirement;
    // Orders the survivors of the previous stage by closeness for the explanation (may be null).
    std::function<double(const Prepared&, const Offer&)> distance;
};

const std::vector<Stage>& stages() {
    static const std::vector<Stage> s = {
        {"machine", [](const Prepared& p) { return p.req.machine.has_value(); },
         [](const Prepared& p, const Offer& o) {
             return detail::iequals(o.instance_type, *p.req.machine);
         },
         [](const Prepared& p) { return "instance type '" + *p.req.machine + "'"; },
         [](const Prepared& p, const Offer& o) {
             return static_cast<double>(detail::edit_distance(o.instance_type, *p.req.machine));
         }},
        {"region", [](const Prepared& p) { return p.req.region.has_value(); },
         [](const Prepared& p, const Offer& o) { return detail::iequals(o.region, *p.req.region); },
         [](const Prepared& p) { return "region '" + *p.req.region + "'"; },
         [](const Prepared& p, const Offer& o) {
             return static_cast<double>(detail::edit_distance(o.region, *p.req.region));
         }},
        {"spot", [](const Prepared& p) { return p.spot_market; },
         [](const Prepared&, const Offer& o) { return o.spot_available; },
         [](const Prepared& p) {
             return "a spot market (spot = \"" + p.req.spot.to_string() +
                    "\"; \"if-available\" would fall back to on-demand)";
         },
         nullptr},
        {"accelerator", [](const Prepared& p) { return !p.req.machine.has_value(); },
         [](const Prepared& p, const Offer& o) {
             if (!p.family) return o.accelerator.empty();
             if (o.accelerator.empty()) return false;
             if (detail::iequals(o.accelerator, *p.family)) return true;  // catalog rows
             const auto c = detail::canonical_accelerator_name(o.accelerator);
             return c && detail::iequals(*c, *p.family);
         },
         [](const Prepared& p) {
             return p.family ? "accelerator " + *p.family
                             : std::string("no accelerator (a CPU-only instance)");
         },
         [](const Prepared& p, const Offer& o) {
             return p.family ? static_cast<double>(detail::edit_distance(o.accelerator, *p.family))
                             : static_cast<double>(o.accelerator_count);
         }},
        {"count", [](const Prepared& p) { return p.family && !p.req.machine; },
         [](const Prepared& p, const Offer& o) { return o.accelerator_count >= p.count; },
         [](const Prepared& p) { return "at least " + std::to_string(p.count) + "x " + *p.family; },
         [](const Prepared& p, const Offer& o) {
             return static_cast<double>(p.count - o.accelerator_count);
         }},
        {"accelerator memory",
         [](const Prepared& p) { return p.family && p.gpu_memory && !p.req.machine; },
         [](const Prepared& p, const Offer& o) {
             return o.gpu_memory_gb + kTolerance >= *p.gpu_memory;
         },
         [](const Prepared& p) {
             return "at least " + fmt_num(*p.gpu_memory) + " GB per " + *p.family;
         },
         [](const Prepared& p, const Offer& o) { return *p.gpu_memory - o.gpu_memory_gb; }},
        {"cpu", [](const Prepared& p) { return p.req.cpu.has_value() && !p.req.machine; },
         [](const Prepared& p, const Offer& o) { return o.vcpus >= *p.req.cpu; },
         [](const Prepared& p) { return "at least " + std::to_string(*p.req.cpu) + " vCPUs"; },
         [](const Prepared& p, const Offer& o) {
             return static_cast<double>(*p.req.cpu - o.vcpus);
         }},
        {"memory", [](const Prepared& p) { return p.memory.has_value() && !p.req.machine; },
         [](const Prepared& p, const Offer& o) { return o.memory_gb + kTolerance >= *p.memory; },
         [](const Prepared& p) { return "at least " + fmt_num(*p.memory) + " GB of memory"; },
         [](const Prepared& p, const Offer& o) { return *p.memory - o.memory_gb; }},
    };
    return s;
}

bool matches(const Prepared& p, const Offer& o, std::string* why) {
    for (const auto& st : stages()) {
        if (!st.applies(p) || st.pass(p, o)) continue;
        if (why) *why = st.name + std::string(": needs ") + st.requirement(p);
        return false;
    }
    return true;
}

void sort_cheapest_first(std::vector<Offer>& v, const Prepared& p) {
    std::stable_sort(v.begin(), v.end(), [&](const Offer& a, const Offer& b) {
        const double pa = a.hourly_price(p.by_spot), pb = b.hourly_price(p.by_spot);
        if (pa != pb) return pa < pb;
        const int da = std::abs(a.accelerator_count - p.count);
        const int db = std::abs(b.accelerator_count - p.count);
        if (da != db) return da < db;
        if (a.vcpus != b.vcpus) return a.vcpus < b.vcpus;
        return std::tie(a.provider, a.instance_type, a.region) <
               std::tie(b.provider, b.instance_type, b.region);
    });
}

}  // namespace

bool offer_matches(const Offer& offer, const SelectionRequest& request, std::string* why) {
    const Prepared p(request);
    return matches(p, offer, why);
}

std::vector<Offer> matching_offers(const std::vector<Offer>& offers,
                                   const SelectionRequest& request) {
    const Prepared p(request);
    std::vector<Offer> out;
    for (const auto& o : offers)
        if (matches(p, o, nullptr)) out.push_back(o);
    sort_cheapest_first(out, p);
    return out;
}

std::optional<Offer> select_instance(const std::vector<Offer>& offers,
                                     const SelectionRequest& request) {
    auto all = matching_offers(offers, request);
    if (all.empty()) return std::nullopt;
    return std::move(all.front());
}

std::string explain_no_match(const std::vector<Offer>& offers, const SelectionRequest& request) {
    const Prepared p(request);
    if (offers.empty()) return "no offers to choose from (the catalog has none for this provider)";
    std::vector<const Offer*> alive;
    for (const auto& o : offers) alive.push_back(&o);
    for (const auto& st : stages()) {
        if (!st.applies(p)) continue;
        std::vector<const Offer*> next;
        for (const auto* o : alive)
            if (st.pass(p, *o)) next.push_back(o);
        if (!next.empty()) {
            alive = std::move(next);
            continue;
        }
        std::string msg = "no offer has " + st.requirement(p);
        if (alive.size() < offers.size()) {
            msg += " among the " + std::to_string(alive.size()) + " offer" +
                   (alive.size() == 1 ? "" : "s") + " that meet the other requirements so far";
        }
        // The nearest candidates, by how far they fall short.
        std::vector<const Offer*> near = alive;
        std::stable_sort(near.begin(), near.end(), [&](const Offer* a, const Offer* b) {
            if (st.distance) {
                const double da = st.distance(p, *a), db = st.distance(p, *b);
                if (da != db) return da < db;
            }
            return a->on_demand_price < b->on_demand_price;
        });
        std::set<std::string> seen;
        std::string list;
        for (const auto* o : near) {
            if (seen.size() >= 3) break;
            if (!seen.insert(o->provider + "/" + o->instance_type).second) continue;
            list += (list.empty() ? "" : "; ") + describe(*o);
        }
        if (!list.empty()) msg += ". Nearest: " + list;
        return msg;
    }
    return {};
}

}  // namespace sky::inline v0
