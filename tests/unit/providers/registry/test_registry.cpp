// The registry pairs each sky::Provider alternative with its provider's descriptor; a provider's
// name comes from its configuration type, and each provider states, with no default, who reaches
// its nodes' rendezvous ports, how it bills and whether its nodes run on this machine.
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <variant>

#include "providers/registry/registry.hpp"
#include "sky/cloud.hpp"
#include "sky/pool.hpp"

using namespace std::chrono_literals;
using sky::detail::descriptor_for;

namespace {

const sky::detail::ProviderFacts& facts(const sky::Provider& p) { return descriptor_for(p).facts; }

sky::detail::Exposure exposure(const sky::Provider& p) {
    return facts(p).exposure.value(sky::PoolSpec{.provider = p});
}

}  // namespace

TEST_CASE("every provider's name is its configuration type's, in its descriptor too",
          "[registry]") {
    const sky::Provider all[] = {sky::Local{},        sky::SSH{},       sky::AWS{},
                                 sky::RunPod{},       sky::VastAI{},    sky::Verda{},
                                 sky::DigitalOcean{}, sky::Simulated{}, sky::Slurm{}};
    for (const auto& p : all) {
        const std::string_view type_name =
            std::visit([](const auto& c) -> std::string_view { return c.name; }, p.config());
        INFO(type_name);
        CHECK(p.name() == type_name);
        CHECK(descriptor_for(p).name == type_name);
        const auto* found = sky::detail::find_provider(type_name);
        REQUIRE(found);
        CHECK(found->name == type_name);
    }
    // One built-in descriptor per alternative but a user's own cloud.
    CHECK(sky::detail::providers().size() == std::variant_size_v<sky::Provider::Config> - 1);
    CHECK(sky::detail::find_provider("custom") == nullptr);
    const sky::Provider custom{sky::CustomCloud{.name = "mycloud", .make = nullptr}};
    CHECK(custom.name() == "mycloud");
    CHECK(descriptor_for(custom).name == "custom");
}

TEST_CASE("every provider states how it bills", "[registry][cost]") {
    using sky::detail::billed_seconds;
    const auto aws = facts(sky::AWS{}).billing.value;
    CHECK(billed_seconds(aws, 10) == 60);  // per second, 60 s minimum
    CHECK(billed_seconds(aws, 61.2) == 62);
    const auto runpod = facts(sky::RunPod{}).billing.value;  // per minute
    CHECK(billed_seconds(runpod, 61) == 120);
    const auto digitalocean = facts(sky::DigitalOcean{}).billing.value;
    CHECK(billed_seconds(digitalocean, 10) == 60);
    CHECK(digitalocean.minimum_charge == Approx(0.01));
    for (const sky::Provider& p : {sky::Provider{sky::VastAI{}}, sky::Provider{sky::Verda{}},
                                   sky::Provider{sky::Local{}}, sky::Provider{sky::SSH{}},
                                   sky::Provider{sky::Simulated{}}, sky::Provider{sky::Slurm{}}}) {
        INFO(p.name());
        const auto b = facts(p).billing.value;
        CHECK(billed_seconds(b, 0.5) == 1);  // per second, no minimum
        CHECK(billed_seconds(b, 0) == 0);
        CHECK(b.minimum_charge == 0.0);
    }
}

TEST_CASE("only Local and Simulated nodes run on this machine, and they mount no volume",
          "[registry][volumes]") {
    CHECK(facts(sky::Local{}).runs_on_this_machine.value);
    CHECK(facts(sky::Simulated{}).runs_on_this_machine.value);
    for (const sky::Provider& p :
         {sky::Provider{sky::SSH{}}, sky::Provider{sky::AWS{}}, sky::Provider{sky::RunPod{}},
          sky::Provider{sky::VastAI{}}, sky::Provider{sky::Verda{}},
          sky::Provider{sky::DigitalOcean{}}, sky::Provider{sky::Slurm{}}}) {
        INFO(p.name());
        CHECK_FALSE(facts(p).runs_on_this_machine.value);
    }
    sky::PoolSpec spec{.provider = sky::Local{},
                       .volumes = {sky::S3Volume{.mount_path = "/data", .bucket = "b"}}};
    try {
        spec.validate();
        FAIL("a Local pool with a volume was accepted");
    } catch (const sky::ConfigError& e) {
        const std::string what = e.what();
        INFO(what);
        CHECK(what.find("the local provider runs its nodes as processes on this machine") !=
              std::string::npos);
    }
}

TEST_CASE("every provider states who reaches its rendezvous ports, and Slurm's are open",
          "[registry][security]") {
    // Where sky makes the machines behind a firewall of the pool's, only they get through.
    for (const sky::Provider& p : {sky::Provider{sky::AWS{}}, sky::Provider{sky::DigitalOcean{}},
                                   sky::Provider{sky::Verda{}}}) {
        INFO(p.name());
        const auto e = exposure(p);
        CHECK_FALSE(e.open());
        CHECK((e.text().find("firewall") != std::string::npos ||
               e.text().find("security group") != std::string::npos));
    }
    const auto slurm = exposure(sky::Slurm{});
    CHECK(slurm.open());
    CHECK(slurm.text().find("every other user of those nodes") != std::string::npos);
    CHECK(slurm.text().find("cluster's network") != std::string::npos);
    CHECK(slurm.text().find("--exclusive") != std::string::npos);
    CHECK(slurm.text().find("authenticate nobody") != std::string::npos);
    const sky::Provider custom{sky::CustomCloud{.name = "mycloud", .make = nullptr}};
    CHECK(exposure(custom).open());
    CHECK(exposure(custom).text().find("cannot tell") != std::string::npos);
}
