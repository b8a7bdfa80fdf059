// The embedded catalog: it loads, its rows are sane, and the AWS shapes agree with EC2's own
// DescribeInstanceTypes data (third-party test data, read in place).
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sky/catalog.hpp>
#include <sky/errors.hpp>

using namespace sky;

TEST_CASE("embedded catalog loads every provider", "[catalog]") {
    const auto& c = Catalog::embedded();
    CHECK(&c == &Catalog::embedded());  // loaded once
    CHECK(c.providers() ==
          std::vector<std::string>{"aws", "digitalocean", "runpod", "vastai", "verda"});
    for (const auto& o : c.offers()) {
        INFO(o.provider << " " << o.instance_type << " " << o.region);
        CHECK(o.on_demand_price > 0);
        CHECK(o.prices_date.size() == 10);
        CHECK(o.vcpus > 0);
        CHECK(o.memory_gb > 0);
        if (!o.accelerator.empty()) {
            CHECK(o.accelerator_count > 0);
            CHECK(o.gpu_memory_gb > 0);
            CHECK_NOTHROW(Accelerator::parse(o.accelerator));
        }
        if (o.spot_price) CHECK(*o.spot_price <= o.on_demand_price);
    }
    for (const auto& o : c.offers("digitalocean")) CHECK_FALSE(o.spot_available);
}

TEST_CASE("embedded catalog: selection on AWS", "[catalog]") {
    const auto& c = Catalog::embedded();
    auto pick = [&](SelectionRequest r) {
        auto v = c.select(r, "aws");
        return v.empty() ? std::string("(none)") : v.front().instance_type;
    };
    CHECK(pick({.accelerator = "A100"}) == "p4d.24xlarge");
    CHECK(pick({.accelerator = "A100-80GB"}) == "p4de.24xlarge");
    CHECK(pick({.accelerator = "H100"}) == "p5.48xlarge");
    CHECK(pick({.accelerator = "L4"}) == "g6.xlarge");
    CHECK(pick({.accelerator = "L40S"}) == "g6e.xlarge");
    CHECK(pick({.accelerator = "T4"}) == "g4dn.xlarge");
    CHECK(pick({.accelerator = "T4:4"}) == "g4dn.12xlarge");
    CHECK(pick({.accelerator = "A10G", .cpu = 32}) == "g5.8xlarge");
    CHECK(pick({.accelerator = "V100-32GB"}) == "p3dn.24xlarge");
    CHECK(pick({.accelerator = "Trainium"}) == "trn1.2xlarge");
    CHECK(pick({.cpu = 8, .memory = "32GB"}) == "m6i.2xlarge");
    CHECK(pick({.accelerator = "L4", .region = "eu-north-9"}) == "(none)");
    CHECK_THAT(explain_no_match(c.offers("aws"), {.accelerator = "B200"}),
               Catch::Contains("accelerator B200"));
    CHECK(pick({.machine = "p5.48xlarge"}) == "p5.48xlarge");
}

TEST_CASE("Catalog::parse_csv rejects malformed rows, naming the line", "[catalog]") {
    const std::string header =
        "instance_type,accelerator,accelerator_count,gpu_memory_gb,vcpus,memory_gb,region,"
        "on_demand_price,spot_price,prices_date\n";
    auto rows = Catalog::parse_csv("x", "# comment\n" + header +
                                            "t1,H100,8,80,192,2048,r,98.32,,2024-12-01\n"
                                            "t2,,0,0,4,16,r,0.1,none,2024-12-01\n"
                                            "t3,A100-80GB,1,80,8,64,r,1.5,0.5,2024-12-01\n");
    REQUIRE(rows.size() == 3);
    CHECK(rows[0].accelerator == "H100");
    CHECK_FALSE(rows[0].spot_price);
    CHECK(rows[0].spot_available);
    CHECK_FALSE(rows[1].spot_available);
    CHECK(rows[2].accelerator == "A100");
    CHECK(rows[2].spot_price == Approx(0.5));
    auto bad = [&](const std::string& row) {
        try {
            (void)Catalog::parse_csv("x", header + row);
        } catch (const ConfigError& e) {
            return std::string(e.what());
        }
        return std::string("(no error)");
    };
    CHECK_THAT(bad("t,H100,8,80,192,2048,r,abc,,2024-12-01\n"),
               Catch::Contains("line 2") && Catch::Contains("on_demand_price"));
    CHECK_THAT(bad("t,H999,8,80,192,2048,r,1,,2024-12-01\n"), Catch::Contains("H999"));
    CHECK_THAT(bad("t,H100,8,80,192\n"), Catch::Contains("10 fields"));
    CHECK_THAT(bad("t,H100,8,80,192,2048,r,1,,Dec 2024\n"), Catch::Contains("prices_date"));
    CHECK_THAT(bad("t,,2,0,4,16,r,1,,2024-12-01\n"), Catch::Contains("disagree"));
    CHECK_THROWS_AS(Catalog::parse_csv("x", "wrong,header\n"), ConfigError);
}

TEST_CASE("AWS catalog rows agree with EC2 DescribeInstanceTypes test data",
          "[catalog][testdata]") {
    const std::filesystem::path file = std::filesystem::path(SKY_TESTDATA_DIR) /
                                       "ec2-instance-types" / "accelerated-instance-types.json";
    if (!std::filesystem::exists(file)) {
        WARN("skipped: " << file.string() << " is absent (third-party test data)");
        return;
    }
    std::ifstream in(file);
    const auto types = nlohmann::json::parse(in);
    int checked = 0;
    std::map<std::string, bool> seen;
    for (const auto& o : Catalog::embedded().offers("aws")) {
        if (seen[o.instance_type]) continue;  // one check per type, not per region
        seen[o.instance_type] = true;
        if (!types.contains(o.instance_type)) continue;
        const auto& t = types[o.instance_type];
        INFO(o.instance_type);
        CHECK(t["VCpuInfo"]["DefaultVCpus"].get<int>() == o.vcpus);
        CHECK(t["MemoryInfo"]["SizeInMiB"].get<double>() / 1024.0 == Approx(o.memory_gb));
        if (t.contains("GpuInfo")) {
            const auto& g = t["GpuInfo"]["Gpus"][0];
            CHECK(Accelerator::parse(g["Name"].get<std::string>()).name == o.accelerator);
            CHECK(g["Count"].get<int>() == o.accelerator_count);
            // The catalog keeps the marketed size (A10G: 24 GB), EC2 the usable MiB (22888).
            const double gib = g["MemoryInfo"]["SizeInMiB"].get<double>() / 1024.0;
            CHECK(std::fabs(gib - o.gpu_memory_gb) / o.gpu_memory_gb < 0.08);
        } else if (t.contains("NeuronInfo")) {
            const auto& d = t["NeuronInfo"]["NeuronDevices"][0];
            CHECK(d["Name"].get<std::string>() == o.accelerator);
            CHECK(d["Count"].get<int>() == o.accelerator_count);
        } else {
            CHECK(o.accelerator.empty());
        }
        ++checked;
    }
    // Most GPU rows are in the test data (p3.* and CPU types are not).
    CHECK(checked >= 40);
}
