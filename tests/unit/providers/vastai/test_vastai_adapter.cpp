// The Vast.ai adapter against the fake Vast.ai API (no root, no SSH): offer search with the
// pool's filters, renting an ask with the onstart script, the direct SSH port, 410 for an ask
// taken meanwhile, outbid bid instances, destroy and the sweep by label.
// What every REST cloud passes is the conformance suite's (support/adapter_conformance.hpp).
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "fakes/vastai/fake_vastai.hpp"
#include "providers/cloud/cloud_backend.hpp"
#include "providers/registry/registry.hpp"
#include "providers/vastai/vastai.hpp"
#include "sky/sky.hpp"
#include "support/adapter_test.hpp"
#include "support/scoped_env.hpp"

using sky::test::FakeVast;
using sky::test::ignore_events;
using sky::test::launch_request;
using sky::test::offer_of;

namespace {

struct Key : sky::test::ScopedEnv {
    explicit Key(const std::string& k) : ScopedEnv({{"VAST_API_KEY", k}}) {}
};

std::unique_ptr<sky::CloudAdapter> adapter(const FakeVast& fake, double reliability = 0.95) {
    return sky::detail::make_vastai_adapter(
        sky::VastAI{.min_reliability = reliability, .endpoint = fake.endpoint()});
}

sky::SelectionRequest rtx4090(sky::Spot spot = sky::Spot::Never{}) {
    sky::SelectionRequest r;
    r.accelerator = sky::Accelerator("RTX4090");
    r.spot = spot;
    return r;
}

}  // namespace

TEST_CASE("vastai: offers come from a filtered search, cheapest ask per model and count",
          "[vastai]") {
    FakeVast fake;
    Key k("vast-fake-key-6a8b0f1c2d");
    auto a = adapter(fake);
    auto offers = a->live_offers(sky::Catalog::embedded(), rtx4090(), ignore_events());
    auto one = offer_of(offers, "1x-RTX4090");
    // The 0.39 ask is below the reliability floor: 0.42 is the cheapest left.
    CHECK(one.on_demand_price == Approx(0.42));
    REQUIRE(one.spot_price.has_value());
    CHECK(*one.spot_price == Approx(0.21));
    CHECK(one.accelerator == "RTX4090");
    CHECK(one.gpu_memory_gb == Approx(24));
    CHECK(one.vcpus == 16);
    CHECK(offer_of(offers, "2x-RTX4090").accelerator_count == 2);
    for (const auto& o : offers) CHECK(o.accelerator == "RTX4090");  // no H100 asked for
    // The query the API got: the documented operators on vast.py's field names.
    auto reqs = fake.http().requests();
    REQUIRE_FALSE(reqs.empty());
    auto q = nlohmann::json::parse(reqs.back().body);
    CHECK(q["gpu_name"]["in"] == nlohmann::json::array({"RTX 4090"}));
    CHECK(q["reliability2"]["gte"] == Approx(0.95));
    CHECK(q["type"] == "on-demand");
    CHECK(q["rentable"]["eq"] == true);
    CHECK(reqs.back().header("Authorization") == "Bearer vast-fake-key-6a8b0f1c2d");
}

TEST_CASE("vastai: an ask is rented with onstart, and its SSH endpoint is the mapped port",
          "[vastai]") {
    FakeVast fake;
    Key k("vast-fake-key-6a8b0f1c2d");
    auto a = adapter(fake);
    auto offers = a->live_offers(sky::Catalog::embedded(), rtx4090(), ignore_events());
    a->create_infra({"0123456789abcdef", "sky-0123456789abcdef", launch_request({}).ssh_public_key},
                    ignore_events());
    REQUIRE(fake.ssh_keys().size() == 1);
    const std::string id = a->launch(launch_request(offer_of(offers, "1x-RTX4090")));
    REQUIRE(fake.rent_requests().size() == 1);
    auto body = fake.rent_requests()[0];
    CHECK(body["client_id"] == "me");
    CHECK(body["label"] == "sky-0123456789abcdef-n0");
    CHECK(body["runtype"] == "ssh_direc ssh_proxy");
    CHECK_FALSE(body.contains("price"));
    const std::string onstart = body["onstart"];
    CHECK(onstart.find("SKY_HOST_KEY") != std::string::npos);
    CHECK(onstart.find("/usr/sbin/sshd") != std::string::npos);
    CHECK(onstart.size() <= 4048);

    CHECK(a->describe({id})[0].state == sky::CloudInstance::State::pending);
    auto up = a->describe({id})[0];
    REQUIRE(up.state == sky::CloudInstance::State::running);
    CHECK(up.public_ip == "198.51.100.7");
    CHECK(up.ssh_port >= 40000);  // the host port Vast.ai mapped to the container's 22
    CHECK(up.pool_id == "0123456789abcdef");
    CHECK(a->list("0123456789abcdef").size() == 1);
    CHECK(a->list("").size() == 1);
    a->terminate({id});
    a->terminate({id});
    CHECK(fake.alive() == 0);
    CHECK(a->describe({id})[0].state == sky::CloudInstance::State::unknown);
    a->delete_infra("0123456789abcdef");
    CHECK(fake.ssh_keys().empty());
}

TEST_CASE("vastai: a taken ask (410) moves to the next, none left is CapacityError", "[vastai]") {
    FakeVast fake;
    Key k("vast-fake-key-6a8b0f1c2d");
    auto a = adapter(fake);
    auto offers = a->live_offers(sky::Catalog::embedded(), rtx4090(), ignore_events());
    fake.take_all_on_rent(true);
    try {
        a->launch(launch_request(offer_of(offers, "1x-RTX4090")));
        FAIL("rented a taken ask");
    } catch (const sky::CapacityError& e) {
        CHECK(std::string(e.what()).find("410") != std::string::npos);
    }
    CHECK(fake.rent_requests().size() == 3);  // every reliable 1x ask tried
    fake.take_all_on_rent(false);
    fake.take("5812001");
    const std::string id = a->launch(launch_request(offer_of(offers, "1x-RTX4090")));
    CHECK_FALSE(id.empty());
    a->terminate({id});
    CHECK(fake.alive() == 0);
}

TEST_CASE("vastai: a bid instance bids over the minimum and is preempted when outbid", "[vastai]") {
    FakeVast fake;
    Key k("vast-fake-key-6a8b0f1c2d");
    auto a = adapter(fake);
    auto offers =
        a->live_offers(sky::Catalog::embedded(), rtx4090(sky::Spot::Always{}), ignore_events());
    const std::string id = a->launch(launch_request(offer_of(offers, "1x-RTX4090"), true));
    auto body = fake.rent_requests().at(0);
    REQUIRE(body.contains("price"));
    CHECK(body["price"].get<double>() >= 0.21);
    fake.outbid(id);
    auto seen = a->describe({id})[0];
    CHECK(seen.spot);
    CHECK(seen.preempted);
    CHECK(seen.state == sky::CloudInstance::State::stopping);
    a->terminate({id});
    CHECK(fake.alive() == 0);
}

TEST_CASE("vastai: the key from ~/.vast_api_key, and ?api_key= also works", "[vastai]") {
    FakeVast fake;
    ::unsetenv("VAST_API_KEY");
    const auto home = std::filesystem::temp_directory_path() / "sky-vast-home-test";
    std::filesystem::create_directories(home);
    const char* old_home = std::getenv("HOME");
    const std::string saved = old_home ? old_home : "";
    ::setenv("HOME", home.c_str(), 1);
    {
        std::ofstream(home / ".vast_api_key") << "vast-fake-key-6a8b0f1c2d\n";
        CHECK(adapter(fake)->list("").empty());
        std::filesystem::remove(home / ".vast_api_key");
        CHECK_THROWS_AS(adapter(fake), sky::ConfigError);
    }
    ::setenv("HOME", saved.c_str(), 1);
    std::filesystem::remove_all(home);
    sky::test::HttpRequest r;
    r.method = "GET";
    r.target = "/api/v0/instances/?owner=me&api_key=vast-fake-key-6a8b0f1c2d";
    r.path = "/api/v0/instances/";
    r.query = "owner=me&api_key=vast-fake-key-6a8b0f1c2d";
    CHECK(fake.http().handle(r).status == 200);
    r.target = "/api/v0/instances/?owner=me";
    r.query = "owner=me";
    CHECK(fake.http().handle(r).status == 401);
}

TEST_CASE("vastai: a pool without an accelerator, or a bad reliability, is a ConfigError",
          "[vastai]") {
    sky::PoolSpec spec;
    spec.provider = sky::VastAI{.min_reliability = 1.5};
    spec.accelerator = "RTX4090";
    CHECK_THROWS_WITH(spec.validate(), Catch::Contains("min_reliability"));
    spec.provider = sky::VastAI{};
    spec.accelerator.reset();
    CHECK_THROWS_WITH(spec.validate(), Catch::Contains("accelerator"));
}

TEST_CASE("vastai: an SSH key whose registration answer is lost is found and not registered twice",
          "[vastai]") {
    FakeVast fake;
    Key k("vast-fake-key-6a8b0f1c2d");
    const std::string key =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeFakeFakeFakeFakeFakeFakeFakeFake "
        "sky-0123456789abcdef";
    sky::test::for_each_lost_answer([&](sky::test::FaultKind lost) {
        auto a = adapter(fake);
        fake.http().add_fault_rate(
            {.method = "POST", .path = "/api/v0/ssh/", .kinds = {lost}, .probability = 1.0});
        a->create_infra({"0123456789abcdef", "sky-0123456789abcdef", key}, ignore_events());
        fake.http().clear_fault_rates();
        CHECK(fake.ssh_keys().size() == 1);
        a->delete_infra("0123456789abcdef");
        CHECK(fake.ssh_keys().empty());
    });
}

TEST_CASE("vastai: live offers win: a catalog type the marketplace does not list is never tried",
          "[vastai]") {
    // The marketplace has only a 2x RTX 4090 ask; the catalog's 1x-RTX4090 ($0.40) is cheaper
    // but nobody offers it now.
    sky::test::FakeVastOptions o;
    for (const auto& a : FakeVast::default_offers())
        if (a["num_gpus"] == 2) o.offers.push_back(a);
    REQUIRE(o.offers.size() == 1);
    FakeVast fake(o);
    Key k("vast-fake-key-6a8b0f1c2d");
    REQUIRE(offer_of(sky::Catalog::embedded().offers("vastai"), "1x-RTX4090").on_demand_price <
            o.offers[0]["dph_total"].get<double>());
    sky::PoolSpec spec;
    spec.provider = sky::VastAI{.endpoint = fake.endpoint()};
    spec.nodes = 1;
    spec.accelerator = "RTX4090";
    spec.spot = sky::Spot::Never{};
    sky::test::EventLog log;
    auto b = sky::detail::make_cloud_backend(
        adapter(fake), sky::detail::BackendContext{spec, "0123456789abcdef", nullptr});
    b->provision(1, log.sink());
    CHECK(log.tried() == std::vector<std::string>{"2x-RTX4090"});
    CHECK(fake.alive() == 1);
    b->stop_all();
    CHECK(fake.alive() == 0);
}

TEST_CASE("vastai: an instance someone labelled sky-... by hand is never taken for a sky pool's",
          "[vastai]") {
    FakeVast fake;
    Key k("vast-fake-key-6a8b0f1c2d");
    auto a = adapter(fake);
    auto offers = a->live_offers(sky::Catalog::embedded(), rtx4090(), ignore_events());
    const auto offer = offer_of(offers, "1x-RTX4090");
    auto by_hand = launch_request(offer);
    by_hand.name = "sky-notebook";  // labelled "sky-notebook-n0" by a teammate
    const std::string theirs = a->launch(by_hand);
    const std::string ours = a->launch(launch_request(offer, false, 1));
    auto listed = a->list("");
    REQUIRE(listed.size() == 1);
    CHECK(listed[0].id == ours);
    CHECK(listed[0].pool_id == "0123456789abcdef");
    a->terminate({theirs, ours});
    CHECK(fake.alive() == 0);
}
