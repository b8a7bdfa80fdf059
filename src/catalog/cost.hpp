#pragma once
// Cost accrual for a pool (the numbers behind the CostUpdate and CostFinal events, api.md §9).
//
// Each instance accrues from its own start to its own stop at its own hourly rate (spot or
// on-demand), rounded up to its provider's billing increment with the provider's minimum. The
// accrued cost of a running instance is what it would cost if stopped now (so it includes the
// minimum charge from the first second, and never goes down). Time is always an argument.
//
// How a provider bills (its increment and minimum) is the provider's to say: its descriptor
// (src/providers/descriptor) states it, from the provider's public statements, and the pool
// passes it with each instance.
#include <chrono>
#include <map>
#include <optional>
#include <sky/catalog.hpp>
#include <string>
#include <string_view>

namespace sky::detail {

/// How a provider rounds billed time. The defaults are per second with no minimum.
struct BillingPolicy {
    std::chrono::seconds increment{1};  ///< billed time is a multiple of this
    std::chrono::seconds minimum{0};    ///< billed time is at least this
    double minimum_charge = 0.0;        ///< USD; each instance costs at least this
};

/// Seconds billed for `elapsed` seconds of running under `policy`.
double billed_seconds(const BillingPolicy& policy, double elapsed);

/// The numbers of a CostUpdate event.
struct CostSnapshot {
    double elapsed_seconds = 0;   ///< since the pool started
    double accumulated_cost = 0;  ///< USD, every instance so far
    double hourly_rate = 0;       ///< USD/h of the instances running now
    int spot_count = 0;           ///< running spot instances
    int ondemand_count = 0;       ///< running on-demand instances
};

/// The numbers of a CostFinal event.
struct CostSummary {
    double total_cost = 0;     ///< USD
    double total_seconds = 0;  ///< pool start to finish
    double hourly_rate = 0;    ///< total_cost per hour of the pool's life (0 when it lasted 0 s)
    int spot_count = 0;        ///< instances ever started on spot (replacements included)
    int ondemand_count = 0;    ///< instances ever started on-demand
    double savings_vs_ondemand = 0;  ///< USD: the same time at on-demand rates minus total_cost
};

/// Accrues the cost of one pool's instances. Not thread-safe: the pool serialises calls.
class CostTracker {
public:
    using Clock = std::chrono::steady_clock;
    using TimePoint = Clock::time_point;

    /// A tracker for a pool that started at `pool_start`.
    explicit CostTracker(TimePoint pool_start) : pool_start_(pool_start) {}

    /// Starts accruing `id` at `at`, billed under `policy` (its provider's): `hourly_rate` is
    /// what it is billed (its spot price for a spot instance), `on_demand_rate` the on-demand
    /// price of the same type (for the savings; pass the same value for an on-demand instance).
    /// Restarting a known id throws std::logic_error.
    void start(const std::string& id, const BillingPolicy& policy, bool spot, double hourly_rate,
               double on_demand_rate, TimePoint at);
    /// Starts accruing `id`, launched from `offer` on spot or on-demand capacity, at `at`.
    void start(const std::string& id, const Offer& offer, const BillingPolicy& policy, bool spot,
               TimePoint at) {
        start(id, policy, spot, offer.hourly_price(spot), offer.on_demand_price, at);
    }
    /// Stops accruing `id` at `at` (idempotent; unknown ids are ignored; `at` before the start
    /// counts as the start).
    void stop(const std::string& id, TimePoint at);
    /// True when `id` was started (running or stopped).
    [[nodiscard]] bool known(const std::string& id) const { return instances_.count(id) != 0; }
    /// Accrues `id` again as if it had never stopped: a worker restarted on the machine it was
    /// lost on (same id) never stopped that machine's bill. Unknown ids are ignored.
    void resume(const std::string& id);
    /// The running totals at `now`.
    [[nodiscard]] CostSnapshot snapshot(TimePoint now) const;
    /// Stops every running instance at `end` and returns the totals.
    [[nodiscard]] CostSummary finish(TimePoint end);
    /// The accrued cost of one instance at `now` (0 for an unknown id).
    [[nodiscard]] double instance_cost(const std::string& id, TimePoint now) const;

private:
    struct Instance {
        BillingPolicy policy;
        bool spot = false;
        double rate = 0;
        double on_demand_rate = 0;
        TimePoint started;
        std::optional<TimePoint> stopped;
    };
    static double cost_of(const Instance& i, TimePoint now, double rate);

    TimePoint pool_start_;
    std::map<std::string, Instance> instances_;
};

}  // namespace sky::detail
