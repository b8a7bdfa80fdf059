// `sky catalog`: compiled into this test from src/cli/catalog_command.cpp.
#include <catch2/catch.hpp>
#include <iostream>
#include <optional>
#include <sstream>

#include "cli/commands.hpp"

namespace {

struct Run {
    int rc;
    std::string out, err;
};

Run run(std::vector<std::string> args) {
    std::ostringstream out, err;
    auto* o = std::cout.rdbuf(out.rdbuf());
    auto* e = std::cerr.rdbuf(err.rdbuf());
    const int rc = sky::cli::catalog_command(args);
    std::cout.rdbuf(o);
    std::cerr.rdbuf(e);
    return {rc, out.str(), err.str()};
}

}  // namespace

TEST_CASE("sky catalog: table of matching offers, cheapest first", "[cli]") {
    auto r = run({"--accelerator", "L4", "--provider", "aws", "--region", "us-east-1"});
    INFO(r.out << r.err);
    REQUIRE(r.rc == 0);
    CHECK_THAT(r.out, Catch::StartsWith("PROVIDER"));
    CHECK_THAT(r.out, Catch::Contains("PRICES AS OF"));
    CHECK_THAT(r.out, Catch::Contains("2024-12-01"));
    const auto first = r.out.find("g6.xlarge"), second = r.out.find("g6.2xlarge");
    REQUIRE(first != std::string::npos);
    REQUIRE(second != std::string::npos);
    CHECK(first < second);
    CHECK(r.out.find("L40S") == std::string::npos);  // L4 is not L40S
    // Columns are aligned: every table line has "us-east-1" at the same column.
    std::istringstream lines(r.out);
    std::string line;
    std::optional<std::size_t> col;
    while (std::getline(lines, line)) {
        const auto at = line.find("us-east-1");
        if (at == std::string::npos) continue;
        if (!col) col = at;
        CHECK(at == *col);
    }
}

TEST_CASE("sky catalog: options and errors", "[cli]") {
    CHECK(run({"--help"}).rc == 0);
    CHECK_THAT(run({"--help"}).out, Catch::Contains("--accelerator"));
    auto bad = run({"--accelerator", "H1000"});
    CHECK(bad.rc == 2);
    CHECK_THAT(bad.err, Catch::Contains("H100"));
    CHECK(run({"--bogus"}).rc == 2);
    CHECK(run({"--provider", "nowhere"}).rc == 2);
    CHECK(run({"--accelerator"}).rc == 2);
    auto none = run({"--accelerator", "B200", "--provider", "aws"});
    CHECK(none.rc == 1);
    CHECK_THAT(none.err, Catch::Contains("B200"));
    auto spot = run({"--spot", "--provider=digitalocean"});
    CHECK(spot.rc == 1);  // DigitalOcean sells no spot
    auto limited = run({"--provider", "aws", "--limit", "3"});
    CHECK(limited.rc == 0);
    CHECK_THAT(limited.out, Catch::Contains("more; --limit"));
    auto all = run({});
    CHECK(all.rc == 0);
    CHECK_THAT(all.out, Catch::Contains("runpod"));
    CHECK_THAT(all.out, Catch::Contains("p5.48xlarge"));
}
