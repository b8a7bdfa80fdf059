#include <catch2/catch.hpp>
#include <cstdlib>
#include <optional>
#include <sky/accelerator.hpp>
#include <sky/errors.hpp>

using namespace sky;

namespace {
std::string message_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "(no ConfigError)";
}
}  // namespace

TEST_CASE("Accelerator::parse: names, counts and variants", "[accelerator]") {
    auto h = Accelerator::parse("H100:8");
    CHECK(h.name == "H100");
    CHECK(h.count == 8);
    CHECK(h.memory == "80GB");
    CHECK(h.manufacturer == "NVIDIA");
    CHECK(h.architecture == "Hopper");
    CHECK(h.cuda_min == "11.8");

    CHECK(Accelerator::parse("h100").name == "H100");
    CHECK(Accelerator::parse("  l40s ").name == "L40S");

    auto a = Accelerator::parse("A100-40GB:2");
    CHECK(a.name == "A100");
    CHECK(a.memory == "40GB");
    CHECK(a.count == 2);
    CHECK_FALSE(Accelerator::parse("A100").memory.has_value());  // any A100

    CHECK(Accelerator::parse("H100-NVL").memory == "94GB");
    CHECK(Accelerator::parse("H100-SXM").name == "H100");
    CHECK(Accelerator::parse("Trainium2").manufacturer == "AWS");
    CHECK(Accelerator::parse("MI300X").memory == "192GB");

    // Implicit conversion, as in PoolSpec{.accelerator = "A100"}.
    std::optional<Accelerator> o = "A100";
    CHECK(o->name == "A100");
    std::optional<Accelerator> s = std::string("T4:4");
    CHECK(s->count == 4);
}

TEST_CASE("Accelerator::parse: errors name the value and suggest", "[accelerator]") {
    CHECK_THROWS_AS(Accelerator::parse("H1000"), ConfigError);
    const auto msg = message_of([] { (void)Accelerator::parse("H1000"); });
    CHECK_THAT(msg, Catch::Contains("H1000"));
    CHECK_THAT(msg, Catch::Contains("H100"));
    CHECK_THAT(message_of([] { (void)Accelerator::parse("A100G"); }), Catch::Contains("A100"));
    CHECK_THAT(message_of([] { (void)Accelerator::parse("L40X"); }), Catch::Contains("L40"));
    CHECK_THROWS_AS(Accelerator::parse("H100:0"), ConfigError);
    CHECK_THROWS_AS(Accelerator::parse("H100:-1"), ConfigError);
    CHECK_THROWS_AS(Accelerator::parse("H100:x"), ConfigError);
    CHECK_THROWS_AS(Accelerator::parse("H100:"), ConfigError);
    CHECK_THROWS_AS(Accelerator::parse(""), ConfigError);
    CHECK_THAT(message_of([] { (void)Accelerator::parse("A100-50GB"); }),
               Catch::Contains("40GB") && Catch::Contains("80GB"));
}

TEST_CASE("Accelerator::to_string round-trips", "[accelerator]") {
    for (const char* spec : {"H100", "H100:8", "A100-40GB:2", "A100", "H100-94GB", "T4:4",
                             "H100@3g.40gb", "A100@1g.5gb:2", "TPU-v5p-8", "Trainium2:16"}) {
        INFO(spec);
        const auto a = Accelerator::parse(spec);
        CHECK(Accelerator::parse(a.to_string()) == a);
    }
    CHECK(Accelerator::parse("H100:8").to_string() == "H100:8");
    CHECK(Accelerator::parse("A100-80GB").to_string() == "A100-80GB");
}

TEST_CASE("Factories carry catalog facts", "[accelerator]") {
    namespace acc = sky::accelerators;
    CHECK(acc::H100() == Accelerator::parse("H100"));
    CHECK(acc::H100().memory == "80GB");
    CHECK(acc::H100({.count = 4}).count == 4);
    CHECK(acc::A100({.memory = "40GB"}).memory == "40GB");
    CHECK(acc::A100({.memory = "40 GiB"}).memory == "40GB");
    CHECK_THROWS_AS(acc::A100({.memory = "48GB"}), ConfigError);
    CHECK(acc::H200().memory == "141GB");
    CHECK(acc::B200().architecture == "Blackwell");
    CHECK(acc::GB200().memory == "384GB");
    CHECK(acc::GH200().memory == "96GB");
    CHECK(acc::L4().memory == "24GB");
    CHECK(acc::L40().memory == "48GB");
    CHECK(acc::L40S().architecture == "Ada Lovelace");
    CHECK(acc::T4().cuda_min == "10.0");
    CHECK(acc::A10().memory == "24GB");
    CHECK(acc::A10G().name == "A10G");
    CHECK(acc::V100().cuda_max == "12.9");
    CHECK(acc::V100({.memory = "32GB"}).memory == "32GB");
    CHECK(acc::B100().memory == "192GB");
    CHECK(acc::Trainium({.version = 2}).name == "Trainium2");
    CHECK(acc::Trainium({.version = 1}).name == "Trainium");
    CHECK_THROWS_AS(acc::Trainium({.version = 7}), ConfigError);
    CHECK(acc::Inferentia({.version = 2}).memory == "32GB");
    CHECK(acc::TPU({.version = "v5p"}).name == "TPU-v5p");
    CHECK(acc::TPU({.version = "v5p"}).manufacturer == "Google");
    CHECK(acc::TPUSlice("v5p-8").name == "TPU-v5p-8");
    CHECK_THROWS_AS(acc::TPUSlice("v9z-8"), ConfigError);
    CHECK(acc::MI("300X").name == "MI300X");
    CHECK(acc::MI("300X").manufacturer == "AMD");
    CHECK_THROWS_AS(acc::MI("999"), ConfigError);
    CHECK_THROWS_AS(acc::H100({.count = 0}), ConfigError);
}

TEST_CASE("MIG profiles follow the seed tables", "[accelerator][mig]") {
    const auto h = mig_profiles("H100");
    REQUIRE(h.size() == 6);
    CHECK(h[0].name == "1g.10gb");
    CHECK(h[0].workers == 7);
    CHECK(h[3].name == "3g.40gb");
    CHECK(h[3].workers == 2);
    CHECK(h[3].memory_gb == 40);
    CHECK(mig_profiles("A100", 80).size() == 6);
    const auto a40 = mig_profiles("A100", 40);
    REQUIRE(a40.size() >= 4);
    CHECK(a40[0].name == "1g.5gb");
    CHECK(a40[0].workers == 7);
    CHECK(a40[2].name == "3g.20gb");
    CHECK(a40[2].workers == 2);
    CHECK(mig_profiles("T4").empty());

    auto c = sky::accelerators::H100({.mig = "3g.40gb"});
    CHECK(c.mig == "3g.40gb");
    CHECK(workers_per_device(c) == 2);
    CHECK(workers_per_device(sky::accelerators::H100()) == 1);
    // A 40 GB-only profile picks the 40 GB A100.
    auto d = sky::accelerators::A100({.mig = "1g.5gb"});
    CHECK(d.memory == "40GB");
    CHECK(workers_per_device(d) == 7);
    CHECK(sky::accelerators::A100({.mig = "2g.20gb"}).memory == "80GB");
    CHECK_THROWS_AS(sky::accelerators::A100({.memory = "80GB", .mig = "1g.5gb"}), ConfigError);
    CHECK_THROWS_AS(sky::accelerators::T4({.mig = "1g.5gb"}), ConfigError);
    CHECK_THAT(message_of([] { (void)sky::accelerators::H100({.mig = "5g.50gb"}); }),
               Catch::Contains("3g.40gb"));
}

TEST_CASE("is_nvidia, is_trainium, known names", "[accelerator]") {
    CHECK(is_nvidia("H100"));
    CHECK(is_nvidia("A100-80GB"));
    CHECK(is_nvidia("t4"));
    CHECK_FALSE(is_nvidia("MI300X"));
    CHECK_FALSE(is_nvidia("Trainium2"));
    CHECK_FALSE(is_nvidia("nonsense"));
    CHECK(is_trainium("Trainium2"));
    CHECK(is_trainium("Trainium"));
    CHECK_FALSE(is_trainium("H100"));
    CHECK_FALSE(is_trainium("Inferentia2"));
    const auto names = known_accelerators();
    for (const char* n : {"H100", "H200", "A100", "B100", "B200", "GB200", "GH200", "L4", "L40",
                          "L40S", "T4", "A10", "A10G", "V100"})
        CHECK(std::find(names.begin(), names.end(), n) != names.end());
    CHECK(accelerator_info("a100").memory_gb == std::vector<int>{40, 80});
}

TEST_CASE("current_accelerator reads SKY_ACCELERATOR", "[accelerator]") {
    ::unsetenv("SKY_ACCELERATOR");
    CHECK_FALSE(current_accelerator().has_value());
    ::setenv("SKY_ACCELERATOR", "H100:8", 1);
    auto a = current_accelerator();
    REQUIRE(a.has_value());
    CHECK(a->name == "H100");
    CHECK(a->count == 8);
    ::setenv("SKY_ACCELERATOR", "garbage!!", 1);
    CHECK_FALSE(current_accelerator().has_value());
    ::unsetenv("SKY_ACCELERATOR");
}

TEST_CASE("parse_memory_gb", "[accelerator]") {
    CHECK(parse_memory_gb("32GB") == Approx(32));
    CHECK(parse_memory_gb("32 GiB") == Approx(32));
    CHECK(parse_memory_gb("512MB") == Approx(0.5));
    CHECK(parse_memory_gb("1.5TB") == Approx(1536));
    CHECK(parse_memory_gb("16") == Approx(16));
    CHECK(parse_memory_gb("8g") == Approx(8));
    CHECK_THROWS_AS(parse_memory_gb("lots"), ConfigError);
    CHECK_THROWS_AS(parse_memory_gb("32XB"), ConfigError);
    CHECK_THROWS_AS(parse_memory_gb("-4GB"), ConfigError);
    CHECK_THAT(message_of([] { (void)parse_memory_gb("abc", "memory"); }),
               Catch::Contains("memory") && Catch::Contains("abc"));
}
