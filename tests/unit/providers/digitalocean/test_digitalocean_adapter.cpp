// The DigitalOcean adapter against the fake DigitalOcean API (no root, no SSH): offers from
// /v2/sizes, the account key, droplets with user_data and the pool's tag, capacity answers,
// rate limits, the sweep by tag, the tag and firewall as the spec demands them. What every REST
// cloud passes (provision and teardown, lost answers, capacity, unknown types, what a killed
// client left) is the conformance suite's (support/adapter_conformance.hpp).
#include <catch2/catch.hpp>
#include <cstdlib>

#include "fakes/digitalocean/fake_digitalocean.hpp"
#include "http/http_client.hpp"
#include "providers/cloud/cloud_backend.hpp"
#include "providers/digitalocean/digitalocean.hpp"
#include "providers/registry/registry.hpp"
#include "sky/sky.hpp"
#include "support/adapter_test.hpp"
#include "support/scoped_env.hpp"

using sky::test::FakeDigitalOcean;
using sky::test::launch_request;
using sky::test::offer_of;

namespace {

// The adapter over `fake`, as a pool with DigitalOcean{.endpoint = fake} makes it.
auto adapter_for(FakeDigitalOcean& fake) {
    return sky::detail::make_digitalocean_adapter(sky::DigitalOcean{.endpoint = fake.endpoint()});
}

// The infrastructure request of pool 0123456789abcdef, with the client key of a launch.
sky::InfraRequest pool_infra() {
    return {"0123456789abcdef", "sky-0123456789abcdef", launch_request({}).ssh_public_key};
}

struct Token : sky::test::ScopedEnv {
    explicit Token(const std::string& t) : ScopedEnv({{"DIGITALOCEAN_TOKEN", t}}) {}
};

// A request to the fake as any client would send it: the answer whatever its status.
sky::detail::HttpResponse ask(const FakeDigitalOcean& fake, const std::string& method,
                              const std::string& path, const nlohmann::json& body = nullptr) {
    sky::detail::HttpRequest r;
    r.method = method;
    r.url = fake.endpoint() + path;
    r.set_header("Authorization", "Bearer dop_v1_fake_token_0123456789abcdef");
    if (!body.is_null()) {
        r.set_header("Content-Type", "application/json");
        r.body = body.dump();
    }
    sky::detail::HttpOptions o;
    o.throw_on_http_error = false;
    o.retry.max_attempts = 1;
    return sky::detail::http_send(r, o);
}

// A firewall of one tcp rule on `ports` from `sources`, applied to `tags`.
nlohmann::json firewall(const std::string& ports, const nlohmann::json& sources,
                        const nlohmann::json& tags = nlohmann::json::array()) {
    return {{"name", "sky-judge"},
            {"tags", tags},
            {"inbound_rules", {{{"protocol", "tcp"}, {"ports", ports}, {"sources", sources}}}}};
}

// DigitalOcean's error body: 422, {"id": "unprocessable_entity", "message": ...}.
void check_unprocessable(const sky::detail::HttpResponse& r, const std::string& words) {
    INFO(r.body);
    CHECK(r.status == 422);
    auto b = nlohmann::json::parse(r.body, nullptr, false);
    REQUIRE(b.is_object());
    CHECK(b["id"] == "unprocessable_entity");
    CHECK(b["message"].get<std::string>().find(words) != std::string::npos);
}

std::vector<sky::Event> g_events;
std::function<void(sky::Event)> keep() {
    g_events.clear();
    return [](sky::Event e) { g_events.push_back(std::move(e)); };
}

}  // namespace

TEST_CASE("digitalocean: live offers carry GPU facts, hourly prices, regions and today's date",
          "[digitalocean]") {
    FakeDigitalOcean fake;
    Token t("dop_v1_fake_token_0123456789abcdef");
    auto a = adapter_for(fake);
    CHECK(a->name() == "digitalocean");
    auto offers = a->live_offers(sky::Catalog::embedded(), {}, keep());
    // The CPU size in the configured region only (nyc1); the H100 in both its regions.
    int cpu = 0, h100 = 0;
    for (const auto& o : offers) {
        CHECK(o.provider == "digitalocean");
        CHECK_FALSE(o.spot_available);
        CHECK(o.prices_date.size() == 10);
        if (o.instance_type == "s-2vcpu-4gb") {
            ++cpu;
            CHECK(o.region == "nyc1");
            CHECK(o.vcpus == 2);
            CHECK(o.memory_gb == Approx(4.0));
            CHECK(o.accelerator.empty());
        }
        if (o.instance_type == "gpu-h100x1-80gb") {
            ++h100;
            CHECK(o.accelerator == "H100");
            CHECK(o.accelerator_count == 1);
            CHECK(o.gpu_memory_gb == Approx(80));
            CHECK(o.on_demand_price == Approx(6.74));
            CHECK((o.region == "nyc2" || o.region == "tor1"));
        }
    }
    CHECK(cpu == 1);
    CHECK(h100 == 2);
    // Live prices win over the catalog's in selection.
    sky::Catalog c = sky::Catalog::embedded();
    c.merge(offers);
    auto picked = c.select({.accelerator = sky::Accelerator("H100")}, "digitalocean");
    REQUIRE_FALSE(picked.empty());
    CHECK(picked[0].on_demand_price == Approx(6.74));
    // The endpoint is not DigitalOcean's: a notice on stderr says where the token goes (once, see
    // the Verda test), not an error event.
    CHECK(g_events.empty());
    for (const auto& r : fake.http().requests())
        CHECK(r.header("Authorization") == "Bearer dop_v1_fake_token_0123456789abcdef");
}

TEST_CASE("digitalocean: a droplet is created with user_data, the account key and the pool's tag",
          "[digitalocean]") {
    FakeDigitalOcean fake;
    Token t("dop_v1_fake_token_0123456789abcdef");
    auto a = adapter_for(fake);
    auto offers = a->live_offers(sky::Catalog::embedded(), {}, keep());
    const sky::InfraRequest infra = pool_infra();
    a->create_infra(infra, keep());
    a->create_infra(infra, keep());  // a second call is fine (the key is found, not duplicated)
    REQUIRE(fake.keys().size() == 1);
    CHECK(fake.keys()[0]["name"] == "sky-0123456789abcdef");

    const std::string id = a->launch(launch_request(offer_of(offers, "gpu-h100x1-80gb")));
    REQUIRE(fake.alive() == 1);
    auto d = fake.droplets()[0];
    CHECK(std::to_string(d["id"].get<long long>()) == id);
    CHECK(d["size_slug"] == "gpu-h100x1-80gb");
    CHECK(d["image"]["slug"] == "gpu-h100x1-base");
    CHECK(d["tags"] == nlohmann::json::array({"sky", "sky-pool-0123456789abcdef"}));
    CHECK(fake.user_data(id).find("SKY_HOST_KEY") != std::string::npos);
    // The create carried the key's id as an integer, as the schema says.
    bool found = false;
    for (const auto& r : fake.http().requests())
        if (r.method == "POST" && r.path == "/v2/droplets") {
            auto b = nlohmann::json::parse(r.body);
            CHECK(b["ssh_keys"].at(0).is_number_integer());
            found = true;
        }
    CHECK(found);

    // new, then active with its public and private addresses.
    auto first = a->describe({id});
    REQUIRE(first.size() == 1);
    CHECK(first[0].state == sky::CloudInstance::State::pending);
    auto second = a->describe({id});
    CHECK(second[0].state == sky::CloudInstance::State::running);
    CHECK(second[0].public_ip.rfind("203.0.113.", 0) == 0);
    CHECK(second[0].private_ip.rfind("10.116.0.", 0) == 0);
    CHECK(second[0].ssh_port == 22);
    CHECK(second[0].pool_id == "0123456789abcdef");

    CHECK(a->list("0123456789abcdef").size() == 1);
    CHECK(a->list("").size() == 1);
    CHECK(a->list("fedcba9876543210").empty());

    a->terminate({id});
    a->terminate({id});  // already gone: success
    CHECK(fake.alive() == 0);
    CHECK(a->describe({id})[0].state == sky::CloudInstance::State::unknown);
    a->delete_infra("0123456789abcdef");
    CHECK(fake.keys().empty());
}

TEST_CASE("digitalocean: a key and a firewall whose answers are lost are found and not made twice",
          "[digitalocean]") {
    FakeDigitalOcean fake;
    Token t("dop_v1_fake_token_0123456789abcdef");
    auto a = adapter_for(fake);
    const sky::InfraRequest infra = pool_infra();
    sky::test::for_each_lost_answer([&](sky::test::FaultKind lost) {
        // Both creates are carried out; neither answer arrives whole.
        fake.http().add_fault_rate(
            {.method = "POST", .path = "/v2/account/keys", .kinds = {lost}, .probability = 1.0});
        fake.http().add_fault_rate(
            {.method = "POST", .path = "/v2/firewalls", .kinds = {lost}, .probability = 1.0});
        a->create_infra(infra, keep());
        fake.http().clear_fault_rates();
        CHECK(fake.keys().size() == 1);
        CHECK(fake.firewalls().size() == 1);
        a->delete_infra("0123456789abcdef");
        CHECK(fake.keys().empty());
        CHECK(fake.firewalls().empty());
        a = sky::detail::make_digitalocean_adapter(
            sky::DigitalOcean{.endpoint = fake.endpoint()});  // no memory of the last round
    });
}

TEST_CASE(
    "digitalocean: the fake refuses what DigitalOcean refuses: ports \"all\", a tag that does not "
    "exist, a droplet id that does not",
    "[digitalocean]") {
    FakeDigitalOcean fake;
    const nlohmann::json anywhere = {{"addresses", {"0.0.0.0/0"}}};
    check_unprocessable(ask(fake, "POST", "/firewalls", firewall("all", anywhere)),
                        "valid range for ports");
    check_unprocessable(ask(fake, "POST", "/firewalls", firewall("70000", anywhere)), "ports");
    check_unprocessable(ask(fake, "POST", "/firewalls", firewall("0", anywhere, {"sky-pool-x"})),
                        "tag sky-pool-x does not exist");
    check_unprocessable(ask(fake, "POST", "/firewalls", firewall("22", {{"tags", {"sky-pool-x"}}})),
                        "tag sky-pool-x does not exist");
    check_unprocessable(
        ask(fake, "POST", "/firewalls", firewall("22", {{"droplet_ids", {3164444999LL}}})),
        "droplet 3164444999 does not exist");
    CHECK(fake.firewalls().empty());
    // Once the tag exists, the same firewall on "0" (all ports) and a range is made.
    CHECK(ask(fake, "POST", "/tags", {{"name", "sky-pool-x"}}).status == 201);
    CHECK(ask(fake, "POST", "/firewalls", firewall("0", anywhere, {"sky-pool-x"})).status == 202);
    CHECK(
        ask(fake, "POST", "/firewalls", firewall("8000-9000", {{"tags", {"sky-pool-x"}}})).status ==
        202);
    CHECK(fake.firewalls().size() == 2);
    // Deleting the tag untags the firewalls; an unknown droplet is a 404 with DigitalOcean's body.
    CHECK(ask(fake, "DELETE", "/tags/sky-pool-x").status == 204);
    CHECK(fake.firewalls()[0]["tags"].empty());
    auto missing = ask(fake, "DELETE", "/droplets/3164444999");
    CHECK(missing.status == 404);
    CHECK(nlohmann::json::parse(missing.body)["id"] == "not_found");
}

TEST_CASE(
    "digitalocean: the pool's tag is made before its firewall names it, the firewall opens every "
    "port with \"0\", and both go with the pool",
    "[digitalocean]") {
    FakeDigitalOcean fake;
    Token t("dop_v1_fake_token_0123456789abcdef");
    auto a = adapter_for(fake);
    const sky::InfraRequest infra = pool_infra();
    a->create_infra(infra, keep());
    a->create_infra(infra, keep());  // a second call makes nothing twice
    REQUIRE(fake.firewalls().size() == 1);
    CHECK(fake.tags() == std::vector<std::string>{"sky-pool-0123456789abcdef"});
    int tag_at = -1, firewall_at = -1, i = 0;
    for (const auto& r : fake.http().requests()) {
        if (r.method == "POST" && r.path == "/v2/tags" && tag_at < 0) tag_at = i;
        if (r.method == "POST" && r.path == "/v2/firewalls" && firewall_at < 0) firewall_at = i;
        ++i;
    }
    CHECK(tag_at >= 0);
    CHECK(tag_at < firewall_at);
    for (const char* k : {"inbound_rules", "outbound_rules"})
        for (const auto& rule : fake.firewalls()[0][k])
            if (rule["protocol"] != "icmp" && rule["ports"] != "22") CHECK(rule["ports"] == "0");
    // What `sky gc` sees from the pool id alone: the key, the firewall, and the tag (no droplet
    // holds it).
    auto other =
        sky::detail::make_digitalocean_adapter(sky::DigitalOcean{.endpoint = fake.endpoint()});
    auto left = other->infra_left("0123456789abcdef");
    CHECK(left.size() == 3);
    // A firewall whose delete fails is named in infra_left, so `sky ls` and `sky gc` see it.
    fake.http().add_fault_rate({.method = "DELETE",
                                .path = "/v2/firewalls/{id}",
                                .kinds = {sky::test::FaultKind::server_error},
                                .probability = 1.0});
    other->delete_infra("0123456789abcdef");
    left = other->infra_left("0123456789abcdef");
    REQUIRE(left.size() == 1);
    CHECK(left[0].find("cloud firewall") != std::string::npos);
    CHECK(fake.firewalls().size() == 1);
    fake.http().clear_fault_rates();
    other->delete_infra("0123456789abcdef");
    CHECK(other->infra_left("0123456789abcdef").empty());
    CHECK(fake.firewalls().empty());
    CHECK(fake.keys().empty());
    CHECK(fake.tags().empty());
}

TEST_CASE("digitalocean: no capacity and a size not sold in the region are CapacityError",
          "[digitalocean]") {
    FakeDigitalOcean fake;
    Token t("dop_v1_fake_token_0123456789abcdef");
    auto a = adapter_for(fake);
    auto offers = a->live_offers(sky::Catalog::embedded(), {}, keep());
    fake.set_capacity("gpu-l40sx1-48gb", 0);
    CHECK_THROWS_AS(a->launch(launch_request(offer_of(offers, "gpu-l40sx1-48gb"))),
                    sky::CapacityError);
    auto wrong_region = offer_of(offers, "gpu-l40sx1-48gb");
    wrong_region.region = "nyc2";
    try {
        a->launch(launch_request(wrong_region));
        FAIL("launched in a region that does not sell the size");
    } catch (const sky::CapacityError& e) {
        CHECK(std::string(e.what()).find("not available in this region") != std::string::npos);
    }
    CHECK(fake.alive() == 0);
}

TEST_CASE("digitalocean: 429 is retried, 401 is an error without the token", "[digitalocean]") {
    FakeDigitalOcean fake;
    {
        Token t("dop_v1_fake_token_0123456789abcdef");
        auto a =
            sky::detail::make_digitalocean_adapter(sky::DigitalOcean{.endpoint = fake.endpoint()});
        fake.rate_limit(2);
        CHECK(a->list("").empty());  // after two 429s
    }
    Token wrong("dop_v1_wrong_secret_token");
    auto a = adapter_for(fake);
    try {
        (void)a->list("");
        FAIL("a wrong token was accepted");
    } catch (const sky::detail::HttpError& e) {
        CHECK(e.status() == 401);
        CHECK(std::string(e.what()).find("dop_v1_wrong_secret_token") == std::string::npos);
        CHECK(std::string(e.what()).find("Unable to authenticate you") != std::string::npos);
    }
    CHECK(fake.auth_failures() == 1);
}

TEST_CASE("digitalocean: configuration errors are ConfigError", "[digitalocean]") {
    ::unsetenv("DIGITALOCEAN_TOKEN");
    CHECK_THROWS_AS(sky::detail::make_digitalocean_adapter(sky::DigitalOcean{}), sky::ConfigError);
    Token t("x");
    CHECK_THROWS_WITH(sky::detail::make_digitalocean_adapter(
                          sky::DigitalOcean{.endpoint = "http://api.example.com/v2"}),
                      Catch::Contains("plain http://"));
    CHECK_THROWS_AS(
        sky::detail::make_digitalocean_adapter(sky::DigitalOcean{.endpoint = "ftp://x/v2"}),
        sky::ConfigError);
}

namespace {

// A one-node pool of `accelerator` in nyc2 on the fake, provisioned; its attempts in `log`.
std::unique_ptr<sky::detail::Backend> provisioned(const FakeDigitalOcean& fake,
                                                  const char* accelerator, sky::PoolSpec& spec,
                                                  sky::test::EventLog& log) {
    spec.provider = sky::DigitalOcean{.region = "nyc2", .endpoint = fake.endpoint()};
    spec.nodes = 1;
    spec.accelerator = accelerator;
    spec.spot = sky::Spot::Never{};
    auto b = sky::detail::make_cloud_backend(
        sky::detail::make_digitalocean_adapter(*spec.provider.get<sky::DigitalOcean>()),
        sky::detail::BackendContext{spec, "0123456789abcdef", nullptr});
    b->provision(1, log.sink());
    return b;
}

}  // namespace

TEST_CASE(
    "digitalocean: live offers win: a region the catalog lists and /v2/sizes does not is never "
    "tried",
    "[digitalocean]") {
    // The catalog sells the L40S in nyc2 and tor1 at $1.57; DigitalOcean lists it in tor1 only,
    // at $1.99 today.
    sky::test::FakeDigitalOceanOptions o;
    for (auto s : FakeDigitalOcean::default_sizes())
        if (s["slug"] == "gpu-l40sx1-48gb") {
            s["price_hourly"] = 1.99;
            o.sizes.push_back(s);
        }
    FakeDigitalOcean fake(o);
    Token t("dop_v1_fake_token_0123456789abcdef");
    sky::PoolSpec spec;
    sky::test::EventLog log;
    auto b = provisioned(fake, "L40S", spec, log);
    CHECK(log.tried() == std::vector<std::string>{"gpu-l40sx1-48gb"});
    int posts = 0;
    for (const auto& r : fake.http().requests())
        if (r.method == "POST" && r.path == "/v2/droplets") {
            ++posts;
            CHECK(nlohmann::json::parse(r.body)["region"] == "tor1");
        }
    CHECK(posts == 1);
    CHECK(fake.alive() == 1);
    b->stop_all();
    CHECK(fake.alive() == 0);
}
