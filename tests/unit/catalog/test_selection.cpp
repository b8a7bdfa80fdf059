#include <catch2/catch.hpp>
#include <set>
#include <sky/catalog.hpp>
#include <sky/errors.hpp>
#include <sky/spot.hpp>

using namespace sky;

namespace {

Offer offer(std::string type, std::string acc, int n, double gpu_mem, int vcpus, double mem,
            std::string region, double od, std::optional<double> spot = std::nullopt,
            bool spot_market = true) {
    Offer o;
    o.provider = "test";
    o.instance_type = std::move(type);
    o.accelerator = std::move(acc);
    o.accelerator_count = n;
    o.gpu_memory_gb = gpu_mem;
    o.vcpus = vcpus;
    o.memory_gb = mem;
    o.region = std::move(region);
    o.on_demand_price = od;
    o.spot_price = spot;
    o.spot_available = spot_market;
    o.prices_date = "2025-01-01";
    return o;
}

std::vector<Offer> fixture() {
    return {
        offer("a100-40-x1", "A100", 1, 40, 12, 85, "r1", 1.10, 0.40),
        offer("a100-80-x1", "A100", 1, 80, 12, 170, "r1", 1.60, 0.70),
        offer("a100-80-x8", "A100", 8, 80, 96, 1152, "r1", 12.80, 5.0),
        offer("h100-x1", "H100", 1, 80, 26, 200, "r1", 2.50, 1.20),
        offer("h100-x8", "H100", 8, 80, 192, 2048, "r2", 20.0, 9.0),
        offer("h100-big", "H100", 1, 80, 64, 512, "r1", 3.50, 0.90),
        offer("l4-x1", "L4", 1, 24, 8, 32, "r1", 0.80, 0.30),
        offer("l40-x1", "L40", 1, 48, 8, 64, "r1", 0.60, 0.25),
        offer("l40s-x1", "L40S", 1, 48, 8, 64, "r1", 0.55, 0.20),
        offer("cpu-small", "", 0, 0, 4, 16, "r1", 0.19),
        offer("cpu-large", "", 0, 0, 32, 128, "r1", 1.50),
        offer("nospot-h100", "H100", 1, 80, 20, 240, "r1", 2.40, std::nullopt, false),
    };
}

std::vector<std::string> types(const std::vector<Offer>& v) {
    std::vector<std::string> out;
    for (const auto& o : v) out.push_back(o.instance_type);
    return out;
}

}  // namespace

TEST_CASE("select_instance: the API example", "[selection]") {
    const auto offers = fixture();
    auto o = select_instance(offers, {.accelerator = "H100", .cpu = 32, .memory = "128GB"});
    REQUIRE(o);
    CHECK(o->instance_type == "h100-big");
    auto cheapest = select_instance(offers, {.accelerator = "H100"});
    REQUIRE(cheapest);
    CHECK(cheapest->instance_type == "nospot-h100");  // on-demand ranking by default
}

TEST_CASE("selection: A100 vs A100-80GB", "[selection]") {
    const auto offers = fixture();
    CHECK(types(matching_offers(offers, {.accelerator = "A100"})) ==
          std::vector<std::string>{"a100-40-x1", "a100-80-x1", "a100-80-x8"});
    CHECK(types(matching_offers(offers, {.accelerator = "A100-80GB"})) ==
          std::vector<std::string>{"a100-80-x1", "a100-80-x8"});
    CHECK(select_instance(offers, {.accelerator = sky::accelerators::A100({.memory = "80GB"})})
              ->instance_type == "a100-80-x1");
    // A MIG profile of the 80 GB card implies 80 GB.
    CHECK(select_instance(offers, {.accelerator = sky::accelerators::A100({.mig = "3g.40gb"})})
              ->instance_type == "a100-80-x1");
}

TEST_CASE("selection: L4 never matches L40 or L40S", "[selection]") {
    const auto offers = fixture();
    CHECK(types(matching_offers(offers, {.accelerator = "L4"})) ==
          std::vector<std::string>{"l4-x1"});
    CHECK(types(matching_offers(offers, {.accelerator = "L40"})) ==
          std::vector<std::string>{"l40-x1"});
    CHECK(types(matching_offers(offers, {.accelerator = "L40S"})) ==
          std::vector<std::string>{"l40s-x1"});
}

TEST_CASE("selection: count, cpu and memory are minimums", "[selection]") {
    const auto offers = fixture();
    CHECK(types(matching_offers(offers, {.accelerator = "A100:2"})) ==
          std::vector<std::string>{"a100-80-x8"});
    CHECK(types(matching_offers(offers, {.accelerator = "H100:8"})) ==
          std::vector<std::string>{"h100-x8"});
    CHECK(types(matching_offers(offers, {.accelerator = "H100", .cpu = 100})) ==
          std::vector<std::string>{"h100-x8"});
    CHECK(types(matching_offers(offers, {.accelerator = "H100", .memory = "500GB"})) ==
          std::vector<std::string>{"h100-big", "h100-x8"});
    CHECK(types(matching_offers(offers, {.accelerator = "H100", .memory = "0.5TB"})) ==
          std::vector<std::string>{"h100-big", "h100-x8"});
    // No accelerator: CPU offers only.
    CHECK(types(matching_offers(offers, {.cpu = 8})) == std::vector<std::string>{"cpu-large"});
    CHECK(types(matching_offers(offers, {})) == std::vector<std::string>{"cpu-small", "cpu-large"});
    CHECK_THROWS_AS(matching_offers(offers, {.memory = "lots"}), ConfigError);
}

TEST_CASE("selection: region and machine override", "[selection]") {
    const auto offers = fixture();
    CHECK(types(matching_offers(offers, {.accelerator = "H100", .region = "r2"})) ==
          std::vector<std::string>{"h100-x8"});
    CHECK(types(matching_offers(offers, {.accelerator = "H100", .region = "R2"})) ==
          std::vector<std::string>{"h100-x8"});
    // machine overrides accelerator, cpu and memory.
    CHECK(types(matching_offers(
              offers, {.accelerator = "T4", .cpu = 1000, .memory = "9TB", .machine = "l4-x1"})) ==
          std::vector<std::string>{"l4-x1"});
    CHECK(matching_offers(offers, {.region = "r2", .machine = "l4-x1"}).empty());
    CHECK(select_instance(offers, {.machine = "cpu-large"})->instance_type == "cpu-large");
}

TEST_CASE("selection: spot ordering and spot market", "[selection]") {
    const auto offers = fixture();
    // On-demand: nospot-h100 (2.40) < h100-x1 (2.50) < h100-big (3.50).
    CHECK(types(matching_offers(offers, {.accelerator = "H100", .region = "r1"})) ==
          std::vector<std::string>{"nospot-h100", "h100-x1", "h100-big"});
    // Always spot: no spot market excluded; by spot price h100-big (0.90) < h100-x1 (1.20).
    CHECK(
        types(matching_offers(offers, {.accelerator = "H100", .region = "r1", .spot = "always"})) ==
        std::vector<std::string>{"h100-big", "h100-x1"});
    // If-available keeps on-demand-only offers, ranked by on-demand price standing in.
    CHECK(types(matching_offers(offers,
                                {.accelerator = "H100", .region = "r1", .spot = "if-available"})) ==
          std::vector<std::string>{"h100-big", "h100-x1", "nospot-h100"});
    CHECK(types(matching_offers(offers, {.accelerator = "H100", .region = "r1", .spot = 0.5})) ==
          std::vector<std::string>{"h100-big", "h100-x1"});
    CHECK(offers[0].hourly_price(true) == Approx(0.40));
    CHECK(offers[9].hourly_price(true) == Approx(0.19));  // unknown spot: on-demand stands in
}

TEST_CASE("selection: explanation of no match", "[selection]") {
    const auto offers = fixture();
    CHECK(explain_no_match(offers, {.accelerator = "H100"}).empty());

    auto why = explain_no_match(offers, {.accelerator = "H100:16"});
    CHECK_THAT(why, Catch::Contains("at least 16x H100"));
    CHECK_THAT(why, Catch::Contains("h100-x8"));

    why = explain_no_match(offers, {.accelerator = "H100", .cpu = 500});
    CHECK_THAT(why, Catch::Contains("500 vCPUs"));
    CHECK_THAT(why, Catch::Contains("h100-x8"));  // the nearest: 192 vCPUs

    why = explain_no_match(offers, {.accelerator = "T4"});
    CHECK_THAT(why, Catch::Contains("accelerator T4"));

    why = explain_no_match(offers, {.accelerator = "H100", .region = "r9"});
    CHECK_THAT(why, Catch::Contains("region 'r9'"));

    why = explain_no_match(offers, {.spot = "always", .machine = "nospot-h100"});
    CHECK_THAT(why, Catch::Contains("spot"));

    why = explain_no_match(offers, {.accelerator = "A100-80GB", .memory = "2TB"});
    CHECK_THAT(why, Catch::Contains("2048 GB of memory"));

    std::string reason;
    CHECK_FALSE(offer_matches(offers[6], {.accelerator = "L40"}, &reason));
    CHECK_THAT(reason, Catch::Contains("accelerator"));
    CHECK(offer_matches(offers[6], {.accelerator = "L4"}));
}

TEST_CASE("Catalog::merge replaces by provider, type and region", "[selection]") {
    Catalog c(fixture());
    CHECK(c.offers("test").size() == fixture().size());
    auto live = offer("h100-x1", "h100", 1, 80, 26, 200, "r1", 1.99, 0.5);
    auto added = offer("h100-x1", "H100", 1, 80, 26, 200, "r3", 2.10, 0.6);
    c.merge({live, added});
    CHECK(c.offers().size() == fixture().size() + 1);
    auto best = c.select({.accelerator = "H100", .region = "r1"});
    REQUIRE(!best.empty());
    CHECK(best.front().instance_type == "h100-x1");
    CHECK(best.front().on_demand_price == Approx(1.99));
    CHECK(best.front().accelerator == "H100");  // canonicalised
    CHECK(c.select({.accelerator = "H100"}, "nobody").empty());
}

TEST_CASE("selection over the embedded catalog returns every match, cheapest first",
          "[selection]") {
    // Its speed is bench/catalog's to measure (a wall-clock bound here would only be flaky).
    const auto& c = Catalog::embedded();
    const SelectionRequest request{.accelerator = "A100", .cpu = 8};
    const auto found = c.select(request);
    // The same rule spelled out over every offer: A100s with at least 8 vCPUs.
    std::multiset<std::string> expected, got;
    for (const auto& o : c.offers())
        if (o.accelerator == "A100" && o.accelerator_count >= 1 && o.vcpus >= 8)
            expected.insert(o.provider + "/" + o.instance_type + "/" + o.region);
    for (const auto& o : found) got.insert(o.provider + "/" + o.instance_type + "/" + o.region);
    REQUIRE_FALSE(expected.empty());
    CHECK(got == expected);
    CHECK(got.size() < c.offers().size());  // the filter did filter
    const bool spot = wants_spot(request.spot);
    for (std::size_t i = 1; i < found.size(); ++i) {
        INFO(found[i - 1].instance_type << " before " << found[i].instance_type);
        CHECK(found[i - 1].hourly_price(spot) <= found[i].hourly_price(spot));
    }
    // Asking again gives the same answer in the same order.
    const auto again = c.select(request);
    REQUIRE(again.size() == found.size());
    for (std::size_t i = 0; i < found.size(); ++i)
        CHECK(again[i].instance_type + again[i].region == found[i].instance_type + found[i].region);
}
