// PoolSpec validation: each bad value is a ConfigError that names the field.
#include <catch2/catch.hpp>
#include <utility>
#include <variant>

#include "sky/sky.hpp"

namespace {
void bad(const sky::PoolSpec& s, const char* names) {
    REQUIRE_THROWS_AS(s.validate(), sky::ConfigError);
    REQUIRE_THROWS_WITH(s.validate(), Catch::Contains(names));
}
}  // namespace

TEST_CASE("PoolSpec defaults are valid and as documented", "[spec]") {
    sky::PoolSpec s;
    CHECK_NOTHROW(s.validate());
    CHECK(s.provider.name() == "local");
    CHECK(s.nodes == 1);
    CHECK(s.timeout == std::chrono::seconds(3600));
    CHECK(s.idle_timeout == std::chrono::seconds(600));
    CHECK(s.concurrency == 1);
    CHECK(s.display == sky::Display::log);
    CHECK(s.collect_metrics);
    CHECK(std::holds_alternative<sky::Spot::Always>(s.spot.strategy));
}

TEST_CASE("bad PoolSpec values are named", "[spec]") {
    bad({.nodes = 0}, "nodes");
    bad({.nodes = 2, .concurrency = 0}, "concurrency");
    bad({.cpu = 0}, "cpu");
    bad({.memory = "lots"}, "memory");
    bad({.machine = ""}, "machine");
    bad({.env = {{"BAD-NAME", "x"}}}, "BAD-NAME");
    bad({.timeout = std::chrono::seconds(0)}, "timeout");
    bad({.idle_timeout = std::chrono::seconds(-1)}, "idle_timeout");
    bad({.provider = sky::SSH{}}, "host");
    bad({.provider = sky::SSH{.hosts = {"10.0.0.1"}}, .nodes = 2}, "hosts");
    bad({.image = sky::Image{.apt = {"bad package"}}}, "image.apt");
    bad({.volumes = {sky::S3Volume{.mount_path = "data", .bucket = "b"}}}, "mount_path");
    CHECK_NOTHROW(sky::PoolSpec{.memory = "32GB"}.validate());
    CHECK_NOTHROW(sky::PoolSpec{.memory = "512 MiB"}.validate());
}

// What this checks: a spec that sets every field validates, and the string forms convert to their
// types. That the fields reach a provider is the providers' e2e tests' business.
TEST_CASE("a spec with every field set validates and its accelerator and spot strings convert",
          "[spec]") {
    sky::PoolSpec s{.provider = sky::AWS{.region = "eu-west-1"},
                    .nodes = 2,
                    .accelerator = "A100",
                    .machine = "p4d.24xlarge",
                    .cpu = 8,
                    .memory = "64GB",
                    .image = sky::Image{.pip = {"torch"}},
                    .spot = "if-available",
                    .volumes = {sky::S3Volume{.mount_path = "/data", .bucket = "b"}},
                    .env = {{"A", "1"}},
                    .timeout = std::chrono::hours(2),
                    .idle_timeout = std::chrono::minutes(5),
                    .concurrency = 2,
                    .display = sky::Display::quiet,
                    .collect_metrics = false};
    CHECK_NOTHROW(s.validate());
    CHECK(s.provider.get<sky::AWS>()->region == "eu-west-1");
    CHECK(s.accelerator->name == "A100");
    CHECK(std::holds_alternative<sky::Spot::IfAvailable>(s.spot.strategy));
}

TEST_CASE("a pool without sky::init refuses to start and says why", "[spec]") {
    // This test binary never calls sky::init.
    REQUIRE_THROWS_AS(sky::ComputePool({.nodes = 1}), sky::ConfigError);
    REQUIRE_THROWS_WITH(sky::ComputePool({.nodes = 1}), Catch::Contains("sky::init"));
}

TEST_CASE("a Provider copies its config, and a moved-from one reads as Local", "[spec]") {
    sky::Provider aws = sky::AWS{.region = "eu-west-1"};
    CHECK(aws.name() == "aws");
    sky::Provider copy = aws;
    REQUIRE(copy.get<sky::AWS>() != nullptr);
    CHECK(copy.get<sky::AWS>()->region == "eu-west-1");
    CHECK(copy.get<sky::AWS>() != aws.get<sky::AWS>());  // its own config, not a shared one
    sky::Provider moved = std::move(aws);
    CHECK(moved.get<sky::AWS>()->region == "eu-west-1");
    CHECK(aws.name() == "local");  // NOLINT(bugprone-use-after-move): what moving leaves
    CHECK(aws.get<sky::Local>() != nullptr);
    CHECK(std::holds_alternative<sky::Local>(aws.config()));
    aws = copy;  // a moved-from provider takes a new value
    CHECK(aws.get<sky::AWS>()->region == "eu-west-1");
    copy = sky::Provider(sky::Slurm{.partition = "gpu"});
    CHECK(copy.name() == "slurm");
    CHECK(copy.get<sky::Slurm>()->partition == "gpu");
    const sky::Provider& same = copy;
    copy = same;  // self-assignment keeps the value
    CHECK(copy.get<sky::Slurm>()->partition == "gpu");
    sky::Provider defaulted;
    CHECK(defaulted.name() == "local");
}
