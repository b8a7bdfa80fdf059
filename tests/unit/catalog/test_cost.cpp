#include <catch2/catch.hpp>

#include "catalog/cost.hpp"

using namespace sky::detail;
using namespace std::chrono_literals;

// Each provider states its policy in its descriptor (tests/unit/providers/registry); here, the
// arithmetic under a policy.
const BillingPolicy per_second_60s_minimum{.increment = 1s, .minimum = 60s};
const BillingPolicy per_minute{.increment = 60s, .minimum = 60s};

TEST_CASE("billed time is rounded up to the increment and at least the minimum", "[cost]") {
    const auto& aws = per_second_60s_minimum;
    CHECK(billed_seconds(aws, 0) == 60);
    CHECK(billed_seconds(aws, 10) == 60);
    CHECK(billed_seconds(aws, 60) == 60);
    CHECK(billed_seconds(aws, 61.2) == 62);
    CHECK(billed_seconds(per_minute, 61) == 120);
    CHECK(billed_seconds(per_minute, 120) == 120);
    const BillingPolicy per_second{};
    CHECK(billed_seconds(per_second, 0.5) == 1);
    CHECK(billed_seconds(per_second, 0) == 0);
}

TEST_CASE("cost accrues per instance at its own rate", "[cost]") {
    const CostTracker::TimePoint t0{};
    CostTracker c(t0);
    c.start("a", per_second_60s_minimum, /*spot=*/false, 3.60, 3.60, t0);
    c.start("b", per_second_60s_minimum, /*spot=*/true, 1.80, 3.60, t0 + 30s);

    // At 10 s only a is running, and AWS bills it 60 s at least: 3.60 * 60 / 3600 = 0.06.
    auto s = c.snapshot(t0 + 10s);
    CHECK(s.elapsed_seconds == Approx(10));
    CHECK(s.accumulated_cost == Approx(0.06));
    CHECK(s.hourly_rate == Approx(3.60));
    CHECK(s.ondemand_count == 1);
    CHECK(s.spot_count == 0);

    // At 1 h: a 3600 s at 3.60 = 3.60; b 3570 s at 1.80 = 1.785.
    s = c.snapshot(t0 + 1h);
    CHECK(s.accumulated_cost == Approx(3.60 + 1.785));
    CHECK(s.hourly_rate == Approx(5.40));
    CHECK(s.spot_count == 1);
    CHECK(s.ondemand_count == 1);

    c.stop("b", t0 + 1h);
    c.stop("b", t0 + 2h);  // idempotent
    c.stop("nope", t0 + 2h);
    s = c.snapshot(t0 + 2h);
    CHECK(s.accumulated_cost == Approx(7.20 + 1.785));
    CHECK(s.hourly_rate == Approx(3.60));
    CHECK(s.spot_count == 0);

    auto f = c.finish(t0 + 2h);
    CHECK(f.total_seconds == Approx(7200));
    CHECK(f.total_cost == Approx(7.20 + 1.785));
    CHECK(f.spot_count == 1);
    CHECK(f.ondemand_count == 1);
    CHECK(f.hourly_rate == Approx((7.20 + 1.785) / 2));
    // b at on-demand would have cost 3.57; it cost 1.785.
    CHECK(f.savings_vs_ondemand == Approx(1.785));
}

TEST_CASE("cost: short spot instance, minimums and replacement", "[cost]") {
    const CostTracker::TimePoint t0{};
    CostTracker c(t0);
    c.start("s1", per_second_60s_minimum, true, 0.72, 2.16, t0);
    c.stop("s1", t0 + 5s);  // preempted at 5 s: billed 60 s
    CHECK(c.instance_cost("s1", t0 + 1h) == Approx(0.72 * 60 / 3600));
    c.start("s2", per_minute, true, 0.60, 1.20, t0 + 5s);  // the replacement
    auto s = c.snapshot(t0 + 65s);                         // s2 ran 60 s: one minute
    CHECK(s.accumulated_cost == Approx(0.012 + 0.01));
    s = c.snapshot(t0 + 66s);  // 61 s: two minutes
    CHECK(s.accumulated_cost == Approx(0.012 + 0.02));
    CHECK_THROWS(c.start("s2", per_minute, true, 0.6, 1.2, t0));
    auto f = c.finish(t0 + 66s);
    CHECK(f.spot_count == 2);
    CHECK(f.ondemand_count == 0);
    CHECK(f.savings_vs_ondemand == Approx((2.16 - 0.72) * 60 / 3600 + (1.20 - 0.60) * 120 / 3600));
}

TEST_CASE("cost: a minimum charge, and a free machine", "[cost]") {
    const CostTracker::TimePoint t0{};
    CostTracker c(t0);
    c.start("d", {.increment = 1s, .minimum = 60s, .minimum_charge = 0.01}, false, 0.036, 0.036,
            t0);
    c.start("l", BillingPolicy{}, false, 0.0, 0.0, t0);
    // 60 s at $0.036/h is $0.0006: the $0.01 minimum applies.
    CHECK(c.instance_cost("d", t0 + 30s) == Approx(0.01));
    CHECK(c.instance_cost("l", t0 + 1h) == 0.0);
    auto f = c.finish(t0 + 0s);
    CHECK(f.total_cost == Approx(0.01));
    CHECK(f.hourly_rate == 0.0);  // lasted 0 s
}

TEST_CASE("cost: started from an offer", "[cost]") {
    sky::Offer o;
    o.provider = "aws";
    o.instance_type = "g6.xlarge";
    o.on_demand_price = 0.8048;
    o.spot_price = 0.35;
    const CostTracker::TimePoint t0{};
    CostTracker c(t0);
    c.start("i-1", o, per_second_60s_minimum, /*spot=*/true, t0);
    c.start("i-2", o, per_second_60s_minimum, /*spot=*/false, t0);
    auto s = c.snapshot(t0 + 1h);
    CHECK(s.hourly_rate == Approx(0.35 + 0.8048));
    CHECK(s.spot_count == 1);
    CHECK(s.ondemand_count == 1);
    auto f = c.finish(t0 + 1h);
    CHECK(f.savings_vs_ondemand == Approx(0.8048 - 0.35));
}
