// sky::RunPod end to end: the real cloud layer and adapter against the fake RunPod GraphQL API,
// whose pods are test hosts with a real sshd (the pinned host key from the start script in the
// pod's env, PUBLIC_KEY authorized, the shipped worker).
#include <catch2/catch.hpp>

#include "fakes/runpod/fake_runpod.hpp"
#include "support/cloud_pool.hpp"

using sky::test::FakeRunPod;
using sky::test::FakeRunPodOptions;

namespace runpod_pool {

const std::string kKey = "rpa_E2E_KEY_5C0FFEE0042";

// The fake RunPod on n test hosts, RUNPOD_API_KEY set; pools of RTX 4090 pods.
struct Cloud : sky::test::CloudOnHosts<FakeRunPod> {
    explicit Cloud(int n)
        : CloudOnHosts(n, {{"RUNPOD_API_KEY", kKey}}, kKey, FakeRunPodOptions{.api_key = kKey}) {}
    sky::PoolSpec spec(int nodes, sky::Spot spot) {
        return pool_spec(sky::RunPod{.endpoint = fake.endpoint()}, nodes, "RTX4090", spot);
    }
};

}  // namespace runpod_pool

using namespace runpod_pool;

TEST_CASE("runpod pool: 2 RTX 4090 pods run a broadcast and a gather, and none is left",
          "[runpod_pool]") {
    SKIP_WITHOUT_HOSTS();
    Cloud cloud(2);
    {
        sky::ComputePool pool{cloud.spec(2, sky::Spot::Never{})};
        sky::test::check_broadcast_and_gather(pool);
        cloud.check_instances(pool, {"runpod", "1x_RTX4090_SECURE", false});
        CHECK(cloud.fake.alive() == 2);
        for (const auto& in : cloud.fake.deploy_inputs()) {
            CHECK(in["name"].get<std::string>().rfind("sky-" + pool.id(), 0) == 0);
            CHECK(in["ports"] == "22/tcp");
        }
    }
    cloud.check_nothing_left();
}

TEST_CASE("runpod pool: no instances available anywhere is a ProvisionError listing every attempt",
          "[runpod_pool]") {
    SKIP_WITHOUT_HOSTS();
    Cloud cloud(1);
    for (const auto& g : FakeRunPod::default_gpu_types()) cloud.fake.set_capacity(g["id"], 0);
    // 1, 2, 4 and 8 RTX 4090s
    for (const auto& a :
         sky::test::provision_attempts(cloud.spec(2, sky::Spot::Never{}), 4, "runpod"))
        CHECK(a.error.find("no longer any instances available") != std::string::npos);
    CHECK(cloud.fake.alive() == 0);
    cloud.events.check_no_secrets();
}

TEST_CASE("runpod pool: an interrupted pod is replaced and calls with .retries(1) complete",
          "[runpod_pool]") {
    SKIP_WITHOUT_HOSTS();
    Cloud cloud(2);
    {
        sky::ComputePool pool{cloud.spec(2, sky::Spot::Always{})};
        REQUIRE(pool.instances().at(1).spot);
        sky::test::check_replacement(pool,
                                     [&](const std::string& id) { cloud.fake.interrupt(id); });
    }
    cloud.check_replaced_and_ended();  // the interrupted (exited) pod was terminated too
}
