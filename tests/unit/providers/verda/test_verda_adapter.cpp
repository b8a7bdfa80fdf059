// The Verda adapter against the fake Verda API (no root, no SSH): OAuth2 with a JSON body and
// renewal after a 401, offers from instance types and availability, the SSH key and a startup
// script per node, the id as text, capacity and funds answers, spot reclaim, delete and sweep.
// What every REST cloud passes is the conformance suite's (support/adapter_conformance.hpp).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>

#include "fakes/verda/fake_verda.hpp"
#include "providers/cloud/cloud_backend.hpp"
#include "providers/registry/registry.hpp"
#include "providers/verda/verda.hpp"
#include "sky/sky.hpp"
#include "support/adapter_test.hpp"
#include "support/capture_stderr.hpp"
#include "support/scoped_env.hpp"

using sky::test::FakeVerda;
using sky::test::FakeVerdaOptions;
using sky::test::ignore_events;
using sky::test::offer_of;

namespace {

struct Creds {
    Creds(const char* id_var, const char* secret_var, const std::string& id,
          const std::string& secret)
        : id_var_(id_var), secret_var_(secret_var) {
        for (const char* v : {"VERDA_CLIENT_ID", "VERDA_CLIENT_SECRET", "DATACRUNCH_CLIENT_ID",
                              "DATACRUNCH_CLIENT_SECRET"})
            ::unsetenv(v);
        ::setenv(id_var, id.c_str(), 1);
        ::setenv(secret_var, secret.c_str(), 1);
    }
    explicit Creds(const FakeVerda&)
        : Creds("VERDA_CLIENT_ID", "VERDA_CLIENT_SECRET", "verda-client-0001",
                "verda-secret-fake-0123456789") {}
    ~Creds() {
        ::unsetenv(id_var_);
        ::unsetenv(secret_var_);
    }
    const char* id_var_;
    const char* secret_var_;
};

// A launch request with the cloud layer's client token.
sky::LaunchRequest request(const sky::Offer& o, bool spot = false, int node = 0) {
    sky::LaunchRequest r = sky::test::launch_request(o, spot, node);
    r.client_token = "sky-0123456789abcdef-0-0-" + std::to_string(node) + "d";
    return r;
}

std::unique_ptr<sky::CloudAdapter> adapter(const FakeVerda& fake, std::string region = "") {
    return sky::detail::make_verda_adapter(
        sky::Verda{.region = region, .endpoint = fake.endpoint()});
}

// The pool's infrastructure request (pool 0123456789abcdef, the test client key).
sky::InfraRequest infra_request() {
    return {"0123456789abcdef", "sky-0123456789abcdef", request({}).ssh_public_key};
}

// An adapter over `fake` with the pool's key registered, and the offers it read.
struct Registered {
    std::unique_ptr<sky::CloudAdapter> a;
    std::vector<sky::Offer> offers;
};
Registered registered(const FakeVerda& fake) {
    Registered r{adapter(fake), {}};
    r.offers = r.a->live_offers(sky::Catalog::embedded(), {}, ignore_events());
    r.a->create_infra(infra_request(), ignore_events());
    return r;
}

}  // namespace

TEST_CASE("verda: offers from instance types and availability, with spot prices", "[verda]") {
    FakeVerda fake;
    Creds c(fake);
    auto a = adapter(fake);
    sky::SelectionRequest req;
    req.spot = sky::Spot::Always{};
    auto offers = a->live_offers(sky::Catalog::embedded(), req, ignore_events());
    auto h100 = offer_of(offers, "1H100.80S.30V");
    CHECK(h100.accelerator == "H100");
    CHECK(h100.accelerator_count == 1);
    CHECK(h100.gpu_memory_gb == Approx(80));
    CHECK(h100.vcpus == 30);
    CHECK(h100.memory_gb == Approx(120));
    CHECK(h100.region == "FIN-01");
    CHECK(h100.on_demand_price == Approx(2.19));
    REQUIRE(h100.spot_price.has_value());
    CHECK(*h100.spot_price == Approx(0.89));
    CHECK(h100.spot_available);
    CHECK(offer_of(offers, "CPU.4V.16G").accelerator.empty());
    // One token for every call; the token request was JSON.
    CHECK(fake.tokens_issued() == 1);
    for (const auto& r : fake.http().requests())
        if (r.path == "/v1/oauth2/token") {
            CHECK(r.header("Content-Type").rfind("application/json", 0) == 0);
            auto b = nlohmann::json::parse(r.body);
            CHECK(b["grant_type"] == "client_credentials");
        }
}

TEST_CASE("verda: launch registers the key, a startup script, and takes the id as text",
          "[verda]") {
    FakeVerda fake;
    Creds c(fake);
    auto [a, offers] = registered(fake);
    const sky::InfraRequest infra = infra_request();
    a->create_infra(infra, ignore_events());
    REQUIRE(fake.ssh_keys().size() == 1);
    const std::string id = a->launch(request(offer_of(offers, "1H100.80S.30V")));
    REQUIRE(fake.alive() == 1);
    auto inst = fake.instances()[0];
    CHECK(inst["id"] == id);
    CHECK(inst["hostname"] == "sky-0123456789abcdef-n0");
    CHECK(inst["description"] == "sky:pool=0123456789abcdef");
    CHECK(inst["location"] == "FIN-01");
    CHECK(inst["ssh_key_ids"] == nlohmann::json::array({fake.ssh_keys()[0]["id"]}));
    REQUIRE(fake.scripts().size() == 1);
    CHECK(fake.scripts()[0]["script"].get<std::string>().find("SKY_HOST_KEY") != std::string::npos);

    // provisioning (no address yet), then running with its address.
    auto early = a->describe({id})[0];
    CHECK(early.state == sky::CloudInstance::State::pending);
    CHECK(early.public_ip.empty());
    auto up = a->describe({id})[0];
    CHECK(up.state == sky::CloudInstance::State::running);
    CHECK(up.public_ip.rfind("135.181.0.", 0) == 0);
    CHECK(up.pool_id == "0123456789abcdef");
    CHECK(a->list("0123456789abcdef").size() == 1);
    CHECK(a->list("ffffffffffffffff").empty());

    a->terminate({id});
    a->terminate({id});
    CHECK(fake.alive() == 0);
    CHECK(a->describe({id})[0].state == sky::CloudInstance::State::unknown);
    a->delete_infra("0123456789abcdef");
    CHECK(fake.ssh_keys().empty());
    CHECK(fake.scripts().empty());
}

TEST_CASE("verda: a startup script refused with a server error, and not made, is sent once more",
          "[verda]") {
    FakeVerda fake;
    Creds c(fake);
    auto [a, offers] = registered(fake);
    fake.http().inject_fault(sky::test::HttpFault{.method = "POST", .path = "/v1/scripts"});
    const std::string id = a->launch(request(offer_of(offers, "1H100.80S.30V"), false, 0));
    CHECK(fake.http().count("POST", "/v1/scripts") == 2);
    REQUIRE(fake.scripts().size() == 1);
    CHECK(fake.instances().back()["startup_script_id"] == fake.scripts()[0]["id"]);
    // Refused twice: the launch fails, naming the refusal; nothing started.
    fake.http().inject_fault(
        sky::test::HttpFault{.method = "POST", .path = "/v1/scripts", .count = 2});
    CHECK_THROWS_WITH(a->launch(request(offer_of(offers, "1H100.80S.30V"), false, 1)),
                      Catch::Contains("POST /scripts failed"));
    CHECK(fake.alive() == 1);
    a->terminate({id});
    a->delete_infra("0123456789abcdef");
    CHECK(fake.scripts().empty());
}

TEST_CASE("verda: a startup script whose answer is lost or unreadable is found by its name",
          "[verda]") {
    FakeVerda fake;
    Creds c(fake);
    auto [a, offers] = registered(fake);
    const sky::InfraRequest infra = infra_request();
    int node = 0;
    sky::test::for_each_lost_answer([&](sky::test::FaultKind lost) {
        // The script is made; its answer is spoiled or never comes.
        fake.http().add_fault_rate(
            {.method = "POST", .path = "/v1/scripts", .kinds = {lost}, .probability = 1.0});
        const std::string id = a->launch(request(offer_of(offers, "1H100.80S.30V"), false, node++));
        fake.http().clear_fault_rates();
        REQUIRE(fake.scripts().size() == 1);
        REQUIRE(fake.alive() == 1);
        CHECK(fake.instances().back()["id"] == id);
        CHECK(fake.instances().back()["startup_script_id"] == fake.scripts()[0]["id"]);
        a->terminate({id});
        a->delete_infra("0123456789abcdef");
        CHECK(fake.scripts().empty());
        a->create_infra(infra, ignore_events());
    });
}

TEST_CASE("verda: an SSH key whose answer is lost is found and not registered twice", "[verda]") {
    FakeVerda fake;
    Creds c(fake);
    sky::InfraRequest infra{"0123456789abcdef", "sky-0123456789abcdef", request({}).ssh_public_key};
    sky::test::for_each_lost_answer([&](sky::test::FaultKind lost) {
        auto a = adapter(fake);
        fake.http().add_fault_rate(
            {.method = "POST", .path = "/v1/sshkeys", .kinds = {lost}, .probability = 1.0});
        a->create_infra(infra, ignore_events());
        fake.http().clear_fault_rates();
        CHECK(fake.ssh_keys().size() == 1);
        a->delete_infra("0123456789abcdef");
        CHECK(fake.ssh_keys().empty());
    });
}

TEST_CASE("verda: an expired token is renewed once with the refresh token", "[verda]") {
    FakeVerda fake;
    Creds c(fake);
    auto a = adapter(fake);
    CHECK(a->list("").empty());
    fake.expire_tokens();
    CHECK(a->list("").empty());
    CHECK(fake.refreshes() == 1);
    CHECK(fake.tokens_issued() == 1);
}

TEST_CASE("verda: DATACRUNCH_* credentials work, wrong ones fail without the secret", "[verda]") {
    FakeVerda fake;
    {
        Creds c("DATACRUNCH_CLIENT_ID", "DATACRUNCH_CLIENT_SECRET", "verda-client-0001",
                "verda-secret-fake-0123456789");
        CHECK(adapter(fake)->list("").empty());
    }
    Creds wrong("VERDA_CLIENT_ID", "VERDA_CLIENT_SECRET", "verda-client-0001",
                "not-the-secret-XYZ123");
    try {
        (void)adapter(fake)->list("");
        FAIL("wrong credentials accepted");
    } catch (const std::exception& e) {
        CHECK(std::string(e.what()).find("not-the-secret-XYZ123") == std::string::npos);
        CHECK(std::string(e.what()).find("Invalid client credentials") != std::string::npos);
    }
    for (const char* v : {"VERDA_CLIENT_ID", "VERDA_CLIENT_SECRET"}) ::unsetenv(v);
    CHECK_THROWS_AS(sky::detail::make_verda_adapter(sky::Verda{}), sky::ConfigError);
}

TEST_CASE("verda: no availability is CapacityError, insufficient funds is not", "[verda]") {
    FakeVerda fake;
    Creds c(fake);
    auto a = adapter(fake);
    auto offers = a->live_offers(sky::Catalog::embedded(), {}, ignore_events());
    auto h100 = offer_of(offers, "1H100.80S.30V");
    fake.set_available("1H100.80S.30V", false, false);
    CHECK_THROWS_AS(a->launch(request(h100)), sky::CapacityError);
    fake.set_available("1H100.80S.30V", true, true);
    fake.set_funds(false);
    try {
        a->launch(request(h100));
        FAIL("launched without funds");
    } catch (const sky::CapacityError&) {
        FAIL("insufficient funds taken for a capacity answer");
    } catch (const sky::ProvisionError& e) {
        CHECK(std::string(e.what()).find("insufficient_funds") != std::string::npos);
    }
    CHECK(fake.alive() == 0);
}

TEST_CASE("verda: a reclaimed spot instance is preempted, one sky deleted is not", "[verda]") {
    FakeVerda fake;
    Creds c(fake);
    auto a = adapter(fake);
    auto offers =
        a->live_offers(sky::Catalog::embedded(), {.spot = sky::Spot::Always{}}, ignore_events());
    a->create_infra({"0123456789abcdef", "sky-0123456789abcdef", request({}).ssh_public_key},
                    ignore_events());
    const std::string id = a->launch(request(offer_of(offers, "1A100.80S.22V"), true));
    fake.preempt(id);
    auto seen = a->describe({id})[0];
    CHECK(seen.spot);
    CHECK(seen.preempted);
    CHECK(seen.state == sky::CloudInstance::State::gone);
    CHECK(fake.alive() == 0);
}

namespace {

// A one-node A100 pool on the fake with this spot strategy; the backend over a fresh adapter.
std::unique_ptr<sky::detail::Backend> a100_pool(const FakeVerda& fake, sky::Spot spot,
                                                sky::PoolSpec& spec) {
    spec.provider = sky::Verda{.endpoint = fake.endpoint()};
    spec.nodes = 1;
    spec.accelerator = "A100";
    spec.spot = spot;
    return sky::detail::make_cloud_backend(
        adapter(fake), sky::detail::BackendContext{spec, "0123456789abcdef", nullptr});
}

}  // namespace

TEST_CASE("verda: live offers win: a catalog type Verda does not list is never tried", "[verda]") {
    // The catalog's cheapest A100, 1A100.40S.22V at $0.79, is not in Verda's /instance-types
    // (the fake lists 1A100.80S.22V and 8A100.80S.176V): ordering it is a 400.
    REQUIRE(offer_of(sky::Catalog::embedded().offers("verda"), "1A100.40S.22V").on_demand_price <
            1.0);
    FakeVerda fake;
    Creds c(fake);
    for (sky::Spot spot : {sky::Spot(sky::Spot::Never{}), sky::Spot(sky::Spot::Always{})}) {
        sky::PoolSpec spec;
        sky::test::EventLog log;
        auto b = a100_pool(fake, spot, spec);
        b->provision(1, log.sink());
        REQUIRE(fake.instances().size() == 1);
        CHECK(fake.instances()[0]["instance_type"] == "1A100.80S.22V");
        CHECK(log.tried() == std::vector<std::string>{"1A100.80S.22V"});
        for (const auto& r : fake.http().requests()) {
            CHECK(r.target.find("1A100.40S") == std::string::npos);
            CHECK(r.body.find("1A100.40S") == std::string::npos);
        }
        b->stop_all();
        CHECK(fake.alive() == 0);
    }
}

TEST_CASE("verda: every offer refused as unknown is a ProvisionError naming each attempt once",
          "[verda]") {
    FakeVerdaOptions o;
    o.unknown_types = {"1A100.80S.22V", "8A100.80S.176V"};
    FakeVerda fake(o);
    Creds c(fake);
    sky::PoolSpec spec;
    auto b = a100_pool(fake, sky::Spot::IfAvailable{}, spec);
    try {
        b->provision(1, ignore_events());
        FAIL("provisioned with every type refused");
    } catch (const sky::ProvisionError& e) {
        const std::string what = e.what();
        INFO(what);
        REQUIRE(e.attempts().size() == 2);
        CHECK(e.attempts()[0].instance_type == "1A100.80S.22V");
        CHECK(e.attempts()[0].error.find("Invalid instance type") != std::string::npos);
        CHECK(e.attempts()[1].instance_type == "8A100.80S.176V");
        CHECK(std::count(what.begin(), what.end(), '\n') == 2);
        CHECK(what.find("verda-secret") == std::string::npos);
    }
    b->stop_all();
    CHECK(fake.alive() == 0);
}

TEST_CASE("verda: a custom endpoint is noticed once, on stderr, and is no error event", "[verda]") {
    FakeVerda fake;
    Creds c(fake);
    sky::test::EventLog log;
    sky::test::CapturedStderr err;
    for (int pool = 0; pool < 2; ++pool) {  // two pools of one program
        auto a = adapter(fake);
        (void)a->live_offers(sky::Catalog::embedded(), {}, log.sink());
    }
    const std::string text = err.text();
    INFO(text);
    CHECK(sky::test::occurrences(text,
                                 "sky: notice: Verda: requests with your client "
                                 "credentials go to " +
                                     fake.endpoint() + " (set by Verda{.endpoint})\n") == 1);
    CHECK(sky::test::occurrences(text, "sky: ") == 1);
    CHECK(log.all<sky::ErrorEvent>().empty());
}
