#include <catch2/catch.hpp>
#include <sky/errors.hpp>
#include <sky/spot.hpp>

using namespace sky;

TEST_CASE("Spot: string and number shorthands", "[spot]") {
    CHECK(std::holds_alternative<Spot::Always>(Spot("always").strategy));
    CHECK(std::holds_alternative<Spot::IfAvailable>(Spot("if-available").strategy));
    CHECK(std::holds_alternative<Spot::Never>(Spot("never").strategy));
    CHECK(std::holds_alternative<Spot::Never>(Spot(std::string("NEVER")).strategy));
    Spot f = 0.8;
    REQUIRE(std::holds_alternative<Spot::Percent>(f.strategy));
    CHECK(std::get<Spot::Percent>(f.strategy).fraction == Approx(0.8));
    CHECK(std::get<Spot::Percent>(Spot::parse("80%").strategy).fraction == Approx(0.8));
    CHECK(std::get<Spot::Percent>(Spot::parse("0.25").strategy).fraction == Approx(0.25));
    Spot d;  // default: always
    CHECK(std::holds_alternative<Spot::Always>(d.strategy));
    CHECK(std::get<Spot::Always>(d.strategy).retries == 10);
}

TEST_CASE("Spot: bad values are ConfigErrors naming the value", "[spot]") {
    CHECK_THROWS_AS(Spot("sometimes"), ConfigError);
    try {
        Spot s = "alwayz";
        FAIL("no throw: " << s.to_string());
    } catch (const ConfigError& e) {
        CHECK_THAT(e.what(), Catch::Contains("alwayz") && Catch::Contains("always"));
        CHECK_THAT(e.what(), Catch::Contains("spot"));
    }
    CHECK_THROWS_AS(Spot::parse("150%"), ConfigError);
    CHECK_THROWS_AS(Spot::parse("1.5"), ConfigError);
    CHECK_THROWS_AS(Spot::parse("0.5x"), ConfigError);
    CHECK_THROWS_AS(Spot(1.5).validate(), ConfigError);
    CHECK_THROWS_AS(Spot(-0.1).validate(), ConfigError);
    CHECK_THROWS_AS(Spot(Spot::Always{.retries = -1}).validate(), ConfigError);
    CHECK_NOTHROW(Spot(0.0).validate());
    CHECK_NOTHROW(Spot(1.0).validate());
}

TEST_CASE("Spot::to_string", "[spot]") {
    CHECK(Spot("always").to_string() == "always");
    CHECK(Spot("if-available").to_string() == "if-available");
    CHECK(Spot("never").to_string() == "never");
    CHECK(Spot(0.8).to_string() == "80%");
    CHECK(Spot(0.125).to_string() == "12.5%");
    for (const char* s : {"always", "if-available", "never", "80%", "12.5%"})
        CHECK(Spot::parse(Spot::parse(s).to_string()).to_string() == s);
}

TEST_CASE("Spot: node split and fallback", "[spot]") {
    CHECK(spot_node_count(Spot("always"), 5) == 5);
    CHECK(spot_node_count(Spot("if-available"), 5) == 5);
    CHECK(spot_node_count(Spot("never"), 5) == 0);
    CHECK(spot_node_count(Spot(0.8), 5) == 4);
    CHECK(spot_node_count(Spot(0.8), 4) == 4);   // 3.2 rounds up: "at least"
    CHECK(spot_node_count(Spot(0.7), 10) == 7);  // 7.000000000000001 is 7
    CHECK(spot_node_count(Spot(0.5), 3) == 2);
    CHECK(spot_node_count(Spot(0.0), 3) == 0);
    CHECK(spot_node_count(Spot(1.0), 3) == 3);
    CHECK(spot_node_count(Spot(0.01), 1) == 1);
    CHECK_THROWS_AS(spot_node_count(Spot(2.0), 3), ConfigError);

    CHECK(on_demand_fallback(Spot("if-available")));
    CHECK_FALSE(on_demand_fallback(Spot("always")));
    CHECK_FALSE(on_demand_fallback(Spot(0.5)));
    CHECK(wants_spot(Spot("always")));
    CHECK(wants_spot(Spot("if-available")));
    CHECK(wants_spot(Spot(0.5)));
    CHECK_FALSE(wants_spot(Spot(0.0)));
    CHECK_FALSE(wants_spot(Spot("never")));
}
