// sky::VastAI end to end: the real cloud layer and adapter against the fake Vast.ai API, whose
// instances are test hosts with a real sshd (the pinned host key from the onstart script, the
// account key authorized, the shipped worker).
#include <catch2/catch.hpp>

#include "fakes/vastai/fake_vastai.hpp"
#include "support/cloud_pool.hpp"

using sky::test::FakeVast;
using sky::test::FakeVastOptions;

namespace vast_pool {

const std::string kKey = "vast-e2e-key-91c0d7a2b3";

// The fake Vast.ai on n test hosts, VAST_API_KEY set; pools of RTX 4090 machines.
struct Cloud : sky::test::CloudOnHosts<FakeVast> {
    explicit Cloud(int n)
        : CloudOnHosts(n, {{"VAST_API_KEY", kKey}}, kKey, FakeVastOptions{.api_key = kKey}) {}
    sky::PoolSpec spec(int nodes, sky::Spot spot) {
        return pool_spec(sky::VastAI{.endpoint = fake.endpoint()}, nodes, "RTX4090", spot);
    }
};

}  // namespace vast_pool

using namespace vast_pool;

TEST_CASE("vastai pool: 2 RTX 4090 instances run a broadcast and a gather, and none is left",
          "[vastai_pool]") {
    SKIP_WITHOUT_HOSTS();
    Cloud cloud(2);
    {
        sky::ComputePool pool{cloud.spec(2, sky::Spot::Never{})};
        sky::test::check_broadcast_and_gather(pool);
        cloud.check_instances(pool, {"vastai", "1x-RTX4090", false});
        CHECK(cloud.fake.alive() == 2);
        REQUIRE(cloud.fake.ssh_keys().size() == 1);
        for (const auto& r : cloud.fake.rent_requests()) {
            CHECK(r["label"].get<std::string>().rfind("sky-" + pool.id(), 0) == 0);
            CHECK(r["onstart"].get<std::string>().find("SKY_HOST_KEY") != std::string::npos);
        }
    }
    CHECK(cloud.fake.ssh_keys().empty());
    cloud.check_nothing_left();
}

TEST_CASE("vastai pool: every ask taken (410) is a ProvisionError listing every attempt",
          "[vastai_pool]") {
    SKIP_WITHOUT_HOSTS();
    Cloud cloud(1);
    cloud.fake.take_all_on_rent(true);
    // 1x-RTX4090, 2x-RTX4090
    for (const auto& a :
         sky::test::provision_attempts(cloud.spec(2, sky::Spot::Never{}), 2, "vastai"))
        CHECK(a.error.find("410") != std::string::npos);
    CHECK(cloud.fake.alive() == 0);
    CHECK(cloud.fake.ssh_keys().empty());
    cloud.events.check_no_secrets();
}

TEST_CASE("vastai pool: an outbid instance is replaced and calls with .retries(1) complete",
          "[vastai_pool]") {
    SKIP_WITHOUT_HOSTS();
    Cloud cloud(2);
    {
        sky::ComputePool pool{cloud.spec(2, sky::Spot::Always{})};
        REQUIRE(pool.instances().at(1).spot);
        sky::test::check_replacement(pool, [&](const std::string& id) { cloud.fake.outbid(id); });
    }
    cloud.check_replaced_and_ended();  // the outbid (stopped) instance was destroyed too
}
