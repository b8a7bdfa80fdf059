// examples/custom_provider's FleetCloud against the fake inventory, without test hosts (no root):
// offers, claims, capacity, the states describe() reports, releases, tags, retries, and the
// token kept out of every message.
#include <catch2/catch.hpp>
#include <set>

#include "fakes/fleet/fake_fleet.hpp"
#include "fleet_cloud.hpp"
#include "sky/sky.hpp"

using sky::test::FakeFleet;
using sky::test::FakeFleetOptions;
using sky::test::HttpFault;
using State = sky::CloudInstance::State;
using namespace std::chrono_literals;

namespace {

const std::string kToken = "fleet-token-Zq8sW2unitTEST";

FakeFleetOptions options() {
    FakeFleetOptions o;
    o.token = kToken;
    o.boot_time = 200ms;
    o.machines = {
        {.id = "s0", .type = "lab-cpu-8", .hourly_price = 0.12, .address = "10.9.0.1"},
        {.id = "s1", .type = "lab-cpu-8", .hourly_price = 0.10, .address = "10.9.0.2"},
        {.id = "g0",
         .type = "lab-a100",
         .vcpus = 32,
         .memory_gb = 256,
         .gpu = "A100",
         .gpu_count = 4,
         .hourly_price = 2.0,
         .address = "10.9.0.3",
         .ssh_port = 2222},
    };
    return o;
}

sky::Offer offer(const std::string& type) {
    sky::Offer o;
    o.provider = "fleet";
    o.instance_type = type;
    return o;
}

sky::LaunchRequest request(const std::string& pool, const std::string& type) {
    sky::LaunchRequest r;
    r.pool_id = pool;
    r.name = "sky-" + pool;
    r.offer = offer(type);
    r.ssh_public_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIUnitTestKey sky-" + pool;
    r.boot_script = "#!/bin/bash\necho boot\n";
    return r;
}

sky::CloudInstance one(fleet::FleetCloud& c, const std::string& id) {
    auto d = c.describe({id});
    REQUIRE(d.size() == 1);
    return d[0];
}

void check_token_sent(FakeFleet& fake) {
    for (const auto& r : fake.http().requests())
        CHECK(r.header("Authorization") == "Bearer " + kToken);
}

}  // namespace

TEST_CASE("fleet cloud: offers are the inventory's machine types", "[fleet]") {
    FakeFleet fake(options());
    fake.set_down("s0", true);
    fleet::FleetCloud cloud(fake.url(), kToken);
    std::vector<std::string> notices;
    auto offers = cloud.live_offers(sky::Catalog{}, {}, [&](sky::Event e) {
        if (auto* err = std::get_if<sky::ErrorEvent>(&e)) notices.push_back(err->message);
    });
    REQUIRE(offers.size() == 2);
    std::map<std::string, sky::Offer> by;
    for (auto& o : offers) by[o.instance_type] = o;
    CHECK(by["lab-cpu-8"].provider == "fleet");
    CHECK(by["lab-cpu-8"].on_demand_price == Approx(0.10));  // the type's cheapest
    CHECK(by["lab-cpu-8"].accelerator.empty());
    CHECK(by["lab-cpu-8"].vcpus == 8);
    CHECK_FALSE(by["lab-cpu-8"].spot_available);
    CHECK(by["lab-a100"].accelerator == "A100");
    CHECK(by["lab-a100"].accelerator_count == 4);
    CHECK(by["lab-a100"].memory_gb == Approx(256));
    REQUIRE(notices.size() == 1);
    CHECK(notices[0] == "fleet: 1 lab-cpu-8 machine(s) down");
    // The catalog selects from them as from any cloud's offers.
    sky::Catalog catalog;
    catalog.merge(offers);
    auto picked = catalog.select({.cpu = 4}, "fleet");
    REQUIRE(picked.size() == 1);  // no accelerator asked: CPU machines only
    CHECK(picked[0].instance_type == "lab-cpu-8");
    check_token_sent(fake);
}

TEST_CASE("fleet cloud: claims, states, capacity, releases and tags", "[fleet]") {
    FakeFleet fake(options());
    fleet::FleetCloud cloud(fake.url(), kToken);

    const std::string a = cloud.launch(request("p1", "lab-cpu-8"));
    const std::string b = cloud.launch(request("p1", "lab-cpu-8"));
    CHECK(a.rfind("s0@c", 0) == 0);
    CHECK(b.rfind("s1@c", 0) == 0);
    auto m = fake.machines();
    CHECK(m[0].pool == "sky-p1");
    CHECK(m[0].boot_script == "#!/bin/bash\necho boot\n");
    CHECK(m[0].public_key.rfind("ssh-ed25519 ", 0) == 0);

    // Every machine of the type is claimed: a capacity error (the pool moves on).
    try {
        (void)cloud.launch(request("p1", "lab-cpu-8"));
        FAIL("expected sky::CapacityError");
    } catch (const sky::CapacityError& e) {
        CHECK(std::string(e.what()) ==
              "fleet: every lab-cpu-8 machine is claimed (2 in the inventory)");
    }
    CHECK_THROWS_AS(cloud.launch(request("p1", "no-such-type")), sky::CapacityError);

    // booting, then ready with the machine's address and port.
    auto i = one(cloud, a);
    CHECK(i.state == State::pending);
    for (int k = 0; k < 50 && one(cloud, a).state != State::running; ++k)
        std::this_thread::sleep_for(20ms);
    i = one(cloud, a);
    CHECK(i.state == State::running);
    CHECK(i.public_ip == "10.9.0.1");
    CHECK(i.private_ip == "10.9.0.1");
    CHECK(i.pool_id == "p1");
    CHECK(i.instance_type == "lab-cpu-8");
    CHECK(one(cloud, "nope@c1").state == State::unknown);
    CHECK(one(cloud, "s0").state == State::unknown);  // not a claim id

    // list: by pool, and every sky claim; someone else's claim is never listed.
    const std::string g = cloud.launch(request("p2", "lab-a100"));
    CHECK(one(cloud, g).ssh_port == 2222);
    auto ids = [](const std::vector<sky::CloudInstance>& v) {
        std::set<std::string> s;
        for (auto& x : v) s.insert(x.id);
        return s;
    };
    CHECK(ids(cloud.list("p1")) == std::set<std::string>{a, b});
    CHECK(ids(cloud.list("p2")) == std::set<std::string>{g});
    CHECK(ids(cloud.list("")) == std::set<std::string>{a, b, g});

    // Release: gone at once; twice is success; an unknown machine is success.
    cloud.terminate({a, "ghost@c9"});
    CHECK(one(cloud, a).state == State::gone);
    cloud.terminate({a});
    CHECK(fake.machines()[0].releases == 1);

    // The machine is claimed again by someone else: the old claim still reads as gone, and a
    // late terminate of it leaves the new claim alone.
    fake.claim_for_someone_else("s0", "other-lab-user");
    CHECK(one(cloud, a).state == State::gone);
    cloud.terminate({a});
    CHECK(fake.machines()[0].pool == "other-lab-user");
    CHECK(ids(cloud.list("")) == std::set<std::string>{b, g});

    cloud.terminate({b, g});
    CHECK(fake.claimed() == 1);  // only the other user's
    check_token_sent(fake);
}

TEST_CASE("fleet cloud: a machine taken between listing and claim moves to the next one",
          "[fleet]") {
    FakeFleet fake(options());
    fleet::FleetCloud cloud(fake.url(), kToken);
    fake.http().inject_fault(HttpFault{.method = "POST",
                                       .path = "/v1/machines/s0/claim",
                                       .reply = {409, R"({"error":"machine s0 is claimed"})"}});
    const std::string id = cloud.launch(request("p1", "lab-cpu-8"));
    CHECK(id.rfind("s1@", 0) == 0);
}

TEST_CASE("fleet cloud: listings are retried, claims are not, errors name no token", "[fleet]") {
    FakeFleet fake(options());
    fleet::FleetCloud cloud(fake.url(), kToken);
    fake.http().inject_fault(HttpFault{.method = "GET", .path = "/v1/machines", .count = 2});
    CHECK(cloud.list("").empty());
    CHECK(fake.http().count("GET", "/v1/machines") == 3);

    fake.http().inject_fault(HttpFault{.method = "POST",
                                       .path = "/v1/machines/{id}/claim",
                                       .reply = {500, R"({"error":"inventory database down"})"}});
    try {
        (void)cloud.launch(request("p1", "lab-cpu-8"));
        FAIL("expected an error");
    } catch (const sky::CapacityError&) {
        FAIL("a server error is no capacity error");
    } catch (const sky::LaunchAnswerLostError& e) {  // the claim may have happened
        CHECK(std::string(e.what()) ==
              "fleet: POST /v1/machines/s0/claim: HTTP 500: inventory database down");
    }
    CHECK(fake.http().count("POST", "/v1/machines/{id}/claim") == 1);

    // A claim carried out whose answer is not the inventory's JSON: lost, and list() finds it
    // by the pool's label (where the pool looks for it).
    fake.http().add_fault_rate({.method = "POST",
                                .path = "/v1/machines/{id}/claim",
                                .kinds = {sky::test::FaultKind::malformed},
                                .probability = 1.0});
    CHECK_THROWS_AS(cloud.launch(request("p9", "lab-cpu-8")), sky::LaunchAnswerLostError);
    fake.http().clear_fault_rates();
    CHECK(fake.http().count("POST", "/v1/machines/{id}/claim") == 2);
    const auto found = cloud.list("p9");
    REQUIRE(found.size() == 1);
    cloud.terminate({found[0].id});
    CHECK(fake.claimed() == 0);

    fleet::FleetCloud wrong(fake.url(), "not-the-token");
    try {
        (void)wrong.list("");
        FAIL("expected an error");
    } catch (const std::exception& e) {
        const std::string what = e.what();
        CHECK(what == "fleet: GET /v1/machines: HTTP 401: a valid bearer token is required");
        CHECK(what.find("not-the-token") == std::string::npos);
    }

    // Nothing listens: a transport error, after the retries, without the token.
    fleet::FleetCloud nowhere("http://127.0.0.1:1", kToken);
    try {
        (void)nowhere.list("");
        FAIL("expected an error");
    } catch (const std::exception& e) {
        CHECK(std::string(e.what()).rfind("fleet: GET /v1/machines: ", 0) == 0);
        CHECK(std::string(e.what()).find(kToken) == std::string::npos);
    }
    CHECK_THROWS_AS(fleet::FleetCloud("ftp://x", kToken), sky::ConfigError);
    CHECK_THROWS_AS(fleet::FleetCloud(fake.url(), ""), sky::ConfigError);
}

TEST_CASE("fleet cloud: converts to a sky::Provider named after it", "[fleet]") {
    sky::Provider p = fleet::FleetCloud("http://127.0.0.1:1", kToken);
    CHECK(p.name() == "fleet");
    REQUIRE(p.get<sky::CustomCloud>() != nullptr);
    auto copy = p.get<sky::CustomCloud>()->make();
    CHECK(copy->name() == "fleet");
    CHECK_FALSE(copy->login().power_off_on_expiry);
}
