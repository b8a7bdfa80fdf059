// The RunPod adapter against the fake RunPod GraphQL API (no root, no SSH): GPU types as
// offers, on-demand and interruptible deploys with typed input variables, the start script in
// the pod's env, runtime ports, "no longer any instances available" as CapacityError,
// interruption, terminate and the sweep by name.
// What every REST cloud passes is the conformance suite's (support/adapter_conformance.hpp).
#include <catch2/catch.hpp>
#include <cstdlib>

#include "fakes/runpod/fake_runpod.hpp"
#include "providers/cloud/cloud_backend.hpp"
#include "providers/registry/registry.hpp"
#include "providers/rest/json_api.hpp"
#include "providers/runpod/runpod.hpp"
#include "sky/sky.hpp"
#include "support/adapter_test.hpp"
#include "support/scoped_env.hpp"
#include "unit/providers/runpod/conformance.hpp"

using sky::test::FakeRunPod;
using sky::test::ignore_events;
using sky::test::launch_request;
using sky::test::offer_of;

namespace {

struct Key : sky::test::ScopedEnv {
    explicit Key(const std::string& k) : ScopedEnv({{"RUNPOD_API_KEY", k}}) {}
};

std::unique_ptr<sky::CloudAdapter> adapter(const FakeRunPod& fake, std::string cloud = "SECURE") {
    return sky::detail::make_runpod_adapter(
        sky::RunPod{.cloud_type = cloud, .endpoint = fake.endpoint()});
}

}  // namespace

TEST_CASE("runpod: GPU types are offers per count, named as the catalog names them", "[runpod]") {
    FakeRunPod fake;
    Key k("rpa_FAKE0123456789ABCDEFGHIJ");
    auto a = adapter(fake);
    auto offers = a->live_offers(sky::Catalog::embedded(), {}, ignore_events());
    auto h100 = offer_of(offers, "1x_H100-80GB_SECURE");
    CHECK(h100.accelerator == "H100");
    CHECK(h100.on_demand_price == Approx(2.99));
    REQUIRE(h100.spot_price.has_value());
    CHECK(*h100.spot_price == Approx(1.75));
    CHECK(offer_of(offers, "8x_H100-80GB_SECURE").on_demand_price == Approx(23.92));
    CHECK(offer_of(offers, "1x_RTX4090_SECURE").on_demand_price == Approx(0.69));
    for (const auto& o : offers) CHECK(o.instance_type.find("COMMUNITY") == std::string::npos);
    auto community =
        adapter(fake, "COMMUNITY")->live_offers(sky::Catalog::embedded(), {}, ignore_events());
    CHECK(offer_of(community, "1x_RTX4090_COMMUNITY").on_demand_price == Approx(0.34));
    for (const auto& o : community) CHECK(o.accelerator != "H100");  // no community H100
}

TEST_CASE("runpod: an on-demand pod carries the start script and exposes 22 on a public port",
          "[runpod]") {
    FakeRunPod fake;
    Key k("rpa_FAKE0123456789ABCDEFGHIJ");
    auto a = adapter(fake);
    auto offers = a->live_offers(sky::Catalog::embedded(), {}, ignore_events());
    const std::string id = a->launch(launch_request(offer_of(offers, "1x_RTX4090_SECURE")));
    REQUIRE(fake.deploy_inputs().size() == 1);
    auto in = fake.deploy_inputs()[0];
    CHECK(in["gpuTypeId"] == "NVIDIA GeForce RTX 4090");
    CHECK(in["cloudType"] == "SECURE");
    CHECK(in["gpuCount"] == 1);
    CHECK(in["ports"] == "22/tcp");
    CHECK(in["startSsh"] == true);
    bool script = false;
    for (const auto& e : in["env"])
        if (e["key"] == "SKY_START") {
            script = e["value"].get<std::string>().find("SKY_HOST_KEY") != std::string::npos;
        }
    CHECK(script);
    CHECK(in["dockerArgs"].get<std::string>().find("SKY_START") != std::string::npos);
    // Typed variables, with the Bearer key.
    for (const auto& r : fake.http().requests())
        CHECK(r.header("Authorization") == "Bearer rpa_FAKE0123456789ABCDEFGHIJ");

    auto first = a->describe({id})[0];
    CHECK(first.state == sky::CloudInstance::State::pending);  // runtime null
    auto up = a->describe({id})[0];
    REQUIRE(up.state == sky::CloudInstance::State::running);
    CHECK(up.public_ip == "194.68.245.10");
    CHECK(up.ssh_port > 22000);
    CHECK(up.pool_id == "0123456789abcdef");
    CHECK_FALSE(up.spot);
    CHECK(a->list("0123456789abcdef").size() == 1);
    CHECK(a->list("ffffffffffffffff").empty());
    a->terminate({id});
    a->terminate({id});
    CHECK(fake.alive() == 0);
    CHECK(a->describe({id})[0].state == sky::CloudInstance::State::unknown);
}

TEST_CASE("runpod: no instances available is CapacityError, other GPU ids are tried first",
          "[runpod]") {
    FakeRunPod fake;
    Key k("rpa_FAKE0123456789ABCDEFGHIJ");
    auto a = adapter(fake);
    auto offers = a->live_offers(sky::Catalog::embedded(), {}, ignore_events());
    fake.set_capacity("NVIDIA H100 80GB HBM3", 0);
    try {
        a->launch(launch_request(offer_of(offers, "1x_H100-80GB_SECURE")));
        FAIL("deployed without capacity");
    } catch (const sky::CapacityError& e) {
        CHECK(std::string(e.what()).find("no longer any instances available") != std::string::npos);
    }
    CHECK(fake.alive() == 0);
}

TEST_CASE("runpod: an interruptible pod bids per GPU and is preempted when interrupted",
          "[runpod]") {
    FakeRunPod fake;
    Key k("rpa_FAKE0123456789ABCDEFGHIJ");
    auto a = adapter(fake);
    auto offers =
        a->live_offers(sky::Catalog::embedded(), {.spot = sky::Spot::Always{}}, ignore_events());
    const std::string id = a->launch(launch_request(offer_of(offers, "1x_H100-80GB_SECURE"), true));
    auto in = fake.deploy_inputs().at(0);
    CHECK(in["bidPerGpu"].get<double>() == Approx(1.75));
    fake.interrupt(id);
    auto seen = a->describe({id})[0];
    CHECK(seen.spot);
    CHECK(seen.preempted);
    a->terminate({id});
    CHECK(fake.alive() == 0);
}

TEST_CASE("runpod: validation errors are not capacity, and the key never shows", "[runpod]") {
    FakeRunPod fake;
    {
        Key k("rpa_FAKE0123456789ABCDEFGHIJ");
        ::setenv("SKY_RUNPOD_IMAGE", "img", 1);
        auto a = adapter(fake);
        auto offers = a->live_offers(sky::Catalog::embedded(), {}, ignore_events());
        ::unsetenv("SKY_RUNPOD_IMAGE");
        fake.set_capacity("NVIDIA GeForce RTX 4090", 5);
        auto o = offer_of(offers, "1x_RTX4090_SECURE");
        CHECK_NOTHROW(a->terminate({a->launch(launch_request(o))}));
    }
    Key wrong("rpa_WRONG_KEY_0000000000");
    try {
        (void)adapter(fake)->list("");
        FAIL("a wrong key was accepted");
    } catch (const std::exception& e) {
        CHECK(std::string(e.what()).find("rpa_WRONG_KEY_0000000000") == std::string::npos);
        CHECK(std::string(e.what()).find("401") != std::string::npos);
    }
    sky::PoolSpec spec;
    spec.provider = sky::RunPod{.cloud_type = "CHEAP"};
    spec.accelerator = "RTX4090";
    CHECK_THROWS_WITH(spec.validate(), Catch::Contains("cloud_type"));
}

namespace {

std::unique_ptr<sky::detail::Backend> a100_pool(const FakeRunPod& fake, sky::PoolSpec& spec) {
    spec.provider = sky::RunPod{.endpoint = fake.endpoint()};
    spec.nodes = 1;
    spec.accelerator = "A100";
    spec.spot = sky::Spot::Never{};
    return sky::detail::make_cloud_backend(
        adapter(fake), sky::detail::BackendContext{spec, "0123456789abcdef", nullptr});
}

}  // namespace

TEST_CASE("runpod: live offers win: a catalog type RunPod does not list is never tried",
          "[runpod]") {
    // RunPod lists only a 40 GB A100, dearer than the catalog's 1x_A100-80GB_SECURE ($1.89),
    // whose GPU ids this account's RunPod does not know.
    FakeRunPod fake(
        sky::test::FakeRunPodOptions{.gpu_types = {sky::test::conformance::RunPodCloud::gpu_type(
                                         "NVIDIA A100-SXM4-40GB", 40, 2.5)}});
    Key k("rpa_FAKE0123456789ABCDEFGHIJ");
    REQUIRE(
        offer_of(sky::Catalog::embedded().offers("runpod"), "1x_A100-80GB_SECURE").on_demand_price <
        2.5);
    sky::PoolSpec spec;
    sky::test::EventLog log;
    auto b = a100_pool(fake, spec);
    b->provision(1, log.sink());
    CHECK(log.tried() == std::vector<std::string>{"1x_A100-40GB_SECURE"});
    REQUIRE(fake.deploy_inputs().size() == 1);
    CHECK(fake.deploy_inputs()[0]["gpuTypeId"] == "NVIDIA A100-SXM4-40GB");
    CHECK(fake.alive() == 1);
    b->stop_all();
    CHECK(fake.alive() == 0);
}

TEST_CASE("runpod: a pod someone named sky-... by hand is never taken for a sky pool's",
          "[runpod]") {
    FakeRunPod fake;
    Key k("rpa_FAKE0123456789ABCDEFGHIJ");
    auto a = adapter(fake);
    auto offers = a->live_offers(sky::Catalog::embedded(), {}, ignore_events());
    const auto offer = offer_of(offers, "1x_RTX4090_SECURE");
    auto by_hand = launch_request(offer);
    by_hand.name = "sky-notebook";  // a teammate's pod "sky-notebook-n0" in the shared account
    const std::string theirs = a->launch(by_hand);
    const std::string ours = a->launch(launch_request(offer));  // "sky-0123456789abcdef-n0"
    auto listed = a->list("");
    REQUIRE(listed.size() == 1);
    CHECK(listed[0].id == ours);
    CHECK(listed[0].pool_id == "0123456789abcdef");
    // Named exactly as sky names pods, but its SKY_POOL says another pool (or none): not sky's.
    auto look_alike = launch_request(offer);
    look_alike.name = "sky-00000000";
    look_alike.pool_id = "someone-elses";
    const std::string copied = a->launch(look_alike);
    listed = a->list("");
    REQUIRE(listed.size() == 1);
    CHECK(listed[0].id == ours);
    CHECK(a->list("00000000").empty());
    CHECK(sky::detail::rest::pool_of_machine_name("sky-deadbeef") == "");
    CHECK(sky::detail::rest::pool_of_machine_name("sky-DEADBEEF-n0") == "");
    CHECK(sky::detail::rest::pool_of_machine_name("sky-deadbeef-n12") == "deadbeef");
    a->terminate({theirs, ours, copied});
    CHECK(fake.alive() == 0);
}
