// Cost accrual per instance with provider billing increments (see cost.hpp).
#include "catalog/cost.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace sky::detail {

double billed_seconds(const BillingPolicy& policy, double elapsed) {
    elapsed = std::max(0.0, elapsed);
    const double inc = static_cast<double>(std::max<long long>(1, policy.increment.count()));
    // Round up to the increment; a hair of floating-point noise does not buy another increment.
    const double rounded = std::ceil(elapsed / inc - 1e-9) * inc;
    return std::max(rounded, static_cast<double>(policy.minimum.count()));
}

double CostTracker::cost_of(const Instance& i, TimePoint now, double rate) {
    const TimePoint end = i.stopped ? std::min(*i.stopped, now) : now;
    if (now < i.started) return 0.0;  // not started yet at `now`
    const double elapsed = std::chrono::duration<double>(end - i.started).count();
    const double cost = rate * billed_seconds(i.policy, elapsed) / 3600.0;
    return rate > 0 ? std::max(cost, i.policy.minimum_charge) : 0.0;
}

void CostTracker::start(const std::string& id, const BillingPolicy& policy, bool spot,
                        double hourly_rate, double on_demand_rate, TimePoint at) {
    if (instances_.count(id)) throw std::logic_error("cost: instance " + id + " started twice");
    if (!(hourly_rate >= 0) || !(on_demand_rate >= 0))
        throw std::invalid_argument("cost: negative or NaN rate for instance " + id);
    instances_.emplace(id, Instance{policy, spot, hourly_rate,
                                    std::max(on_demand_rate, hourly_rate), at, std::nullopt});
}

void CostTracker::stop(const std::string& id, TimePoint at) {
    auto it = instances_.find(id);
    if (it == instances_.end() || it->second.stopped) return;
    it->second.stopped = std::max(at, it->second.started);
}

void CostTracker::resume(const std::string& id) {
    if (auto it = instances_.find(id); it != instances_.end()) it->second.stopped.reset();
}

double CostTracker::instance_cost(const std::string& id, TimePoint now) const {
    auto it = instances_.find(id);
    return it == instances_.end() ? 0.0 : cost_of(it->second, now, it->second.rate);
}

CostSnapshot CostTracker::snapshot(TimePoint now) const {
    CostSnapshot s;
    s.elapsed_seconds = std::max(0.0, std::chrono::duration<double>(now - pool_start_).count());
    for (const auto& [id, i] : instances_) {
        s.accumulated_cost += cost_of(i, now, i.rate);
        const bool running = i.started <= now && (!i.stopped || *i.stopped > now);
        if (!running) continue;
        s.hourly_rate += i.rate;
        (i.spot ? s.spot_count : s.ondemand_count) += 1;
    }
    return s;
}

CostSummary CostTracker::finish(TimePoint end) {
    for (auto& [id, i] : instances_)
        if (!i.stopped) i.stopped = std::max(end, i.started);
    CostSummary s;
    s.total_seconds = std::max(0.0, std::chrono::duration<double>(end - pool_start_).count());
    double on_demand_cost = 0;
    for (const auto& [id, i] : instances_) {
        s.total_cost += cost_of(i, end, i.rate);
        on_demand_cost += cost_of(i, end, i.on_demand_rate);
        (i.spot ? s.spot_count : s.ondemand_count) += 1;
    }
    s.hourly_rate = s.total_seconds > 0 ? s.total_cost * 3600.0 / s.total_seconds : 0.0;
    s.savings_vs_ondemand = std::max(0.0, on_demand_cost - s.total_cost);
    return s;
}

}  // namespace sky::detail
