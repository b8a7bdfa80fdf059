// The cloud layer over an in-memory adapter: the offer walk, the spot strategies, cleanup of a
// partly launched offer, the sweep by tag, and that nothing is left alive. No root, no SSH.
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <thread>

#include "fakes/cloud/fake_cloud.hpp"
#include "ledger/ledger.hpp"
#include "providers/cloud/cloud_backend.hpp"
#include "providers/cloud/node_keys.hpp"
#include "providers/cloud/offers.hpp"
#include "providers/cloud/refusal.hpp"
#include "providers/cloud/sweep.hpp"
#include "providers/registry/registry.hpp"
#include "sky/sky.hpp"
#include "support/temp_home.hpp"

using sky::test::FakeCloud;
using sky::test::FakeCloudState;

namespace {

struct Run {
    std::shared_ptr<FakeCloudState> cloud = std::make_shared<FakeCloudState>();
    std::vector<sky::Event> events;
    std::mutex m;

    sky::PoolSpec spec(sky::Spot spot, int nodes = 2) {
        sky::PoolSpec s;
        s.provider = FakeCloud{cloud};  // a user's adapter converts to sky::Provider
        s.nodes = nodes;
        s.spot = spot;
        return s;
    }
    std::unique_ptr<sky::detail::Backend> backend(const sky::PoolSpec& s) {
        return sky::detail::descriptor_for(s.provider)
            .make_backend(sky::detail::BackendContext{s, "pool1", nullptr});
    }
    std::function<void(sky::Event)> emit() {
        return [this](sky::Event e) {
            std::lock_guard lk(m);
            events.push_back(std::move(e));
        };
    }
    template <class E>
    std::vector<E> all() {
        std::lock_guard lk(m);
        std::vector<E> v;
        for (auto& e : events)
            if (auto* x = std::get_if<E>(&e)) v.push_back(*x);
        return v;
    }
};

sky::Spot never() { return sky::Spot::Never{}; }
sky::Spot always(int retries = 0) {
    return sky::Spot::Always{.retries = retries, .interval = std::chrono::seconds(0)};
}

}  // namespace

TEST_CASE("cloud layer: a user's adapter converts to a provider named by its name()", "[cloud]") {
    Run r;
    auto spec = r.spec(never());
    CHECK(spec.provider.name() == "fakecloud");
    CHECK(spec.provider.get<sky::CustomCloud>() != nullptr);
    spec.validate();
}

TEST_CASE(
    "cloud layer: the cheapest offer is launched, one launch per node, and stop_all "
    "terminates, confirms and deletes the infrastructure",
    "[cloud]") {
    Run r;
    auto spec = r.spec(never());
    auto b = r.backend(spec);
    b->provision(2, r.emit());
    CHECK(r.cloud->live() == 2);
    CHECK(r.cloud->live_types() == std::vector<std::string>{"small", "small"});
    CHECK(r.cloud->count("launch small on-demand") == 2);
    CHECK(r.cloud->count("create_infra pool1") == 1);
    auto provisioned = r.all<sky::InstanceProvisioned>();
    REQUIRE(provisioned.size() == 2);
    CHECK(provisioned[0].node == 0);
    CHECK(provisioned[1].node == 1);
    CHECK(provisioned[0].provider == "fakecloud");
    CHECK(provisioned[0].price_on_demand == 1.0);
    CHECK(r.all<sky::InfraCreated>().at(0).region == "fake-1");
    CHECK(b->head_address() == "10.0.0.1");
    b->stop_all();
    CHECK(r.cloud->live() == 0);
    CHECK(r.cloud->count("list pool1") == 1);  // the sweep by tag
    CHECK(r.cloud->count("delete_infra pool1") == 1);
    b->stop_all();  // a second stop costs no terminate
    CHECK(r.cloud->count("terminate") == 2);
}

TEST_CASE("cloud layer: a capacity error moves to the next offer, and the attempt is kept",
          "[cloud]") {
    Run r;
    r.cloud->capacity["small"] = 0;
    auto spec = r.spec(never());
    auto b = r.backend(spec);
    b->provision(2, r.emit());
    CHECK(r.cloud->live_types() == std::vector<std::string>{"medium", "medium"});
    auto launching = r.all<sky::InstanceLaunching>();
    REQUIRE(launching.size() == 2);
    CHECK(launching[0].instance_type == "small");
    CHECK(launching[1].instance_type == "medium");
    b->stop_all();
    CHECK(r.cloud->live() == 0);
}

TEST_CASE("cloud layer: an offer that starts only some nodes terminates them before the next",
          "[cloud]") {
    Run r;
    r.cloud->capacity["small"] = 2;  // 2 of 3
    auto spec = r.spec(never(), 3);
    auto b = r.backend(spec);
    b->provision(3, r.emit());
    CHECK(r.cloud->live_types() == std::vector<std::string>{"medium", "medium", "medium"});
    CHECK(r.cloud->count("terminate fake-1") == 1);
    CHECK(r.cloud->count("terminate fake-2") == 1);
    b->stop_all();
    CHECK(r.cloud->live() == 0);
}

TEST_CASE(
    "cloud layer: spot always never launches on-demand, if-available falls back to "
    "on-demand on the same offer, percent puts its share on spot",
    "[cloud]") {
    SECTION("always") {
        Run r;
        r.cloud->spot_capacity["small"] = 0;
        r.cloud->spot_capacity["medium"] = 0;
        auto spec = r.spec(always());
        auto b = r.backend(spec);
        try {
            b->provision(1, r.emit());
            FAIL("provisioned without spot capacity");
        } catch (const sky::ProvisionError& e) {
            // "large" has no spot market: selection leaves it out.
            REQUIRE(e.attempts().size() == 2);
            CHECK(e.attempts()[0].instance_type == "small");
            CHECK(e.attempts()[0].spot);
            CHECK(e.attempts()[0].error.find("InsufficientCapacity") != std::string::npos);
            CHECK(e.attempts()[1].instance_type == "medium");
            CHECK(std::string(e.what()).find("every offer failed") != std::string::npos);
        }
        CHECK(r.cloud->count("launch") == 2);  // never an on-demand launch
        b->stop_all();
        CHECK(r.cloud->live() == 0);
    }
    SECTION("if-available") {
        Run r;
        r.cloud->spot_capacity["small"] = 0;
        auto spec = r.spec(sky::Spot::IfAvailable{});
        auto b = r.backend(spec);
        b->provision(1, r.emit());
        CHECK(r.cloud->count("launch small spot") == 1);
        CHECK(r.cloud->count("launch small on-demand") == 1);
        auto p = r.all<sky::InstanceProvisioned>().at(0);
        CHECK_FALSE(p.spot);
        CHECK(p.instance_type == "small");
        b->stop_all();
        CHECK(r.cloud->live() == 0);
    }
    SECTION("percent") {
        Run r;
        auto spec = r.spec(sky::Spot::Percent{0.5}, 4);
        auto b = r.backend(spec);
        b->provision(4, r.emit());
        int spot = 0;
        for (auto& p : r.all<sky::InstanceProvisioned>()) spot += p.spot ? 1 : 0;
        CHECK(spot == 2);
        b->stop_all();
        CHECK(r.cloud->live() == 0);
    }
}

TEST_CASE(
    "cloud layer: no capacity anywhere is a ProvisionError naming every attempt of every "
    "round, and nothing is alive",
    "[cloud]") {
    Run r;
    for (auto t : {"small", "medium", "large"}) {
        r.cloud->capacity[t] = 0;
        r.cloud->spot_capacity[t] = 0;
    }
    SECTION("if-available: spot, then on-demand on the same offer; large has no spot market") {
        auto spec = r.spec(sky::Spot::IfAvailable{});
        auto b = r.backend(spec);
        try {
            b->provision(2, r.emit());
            FAIL("provisioned without capacity");
        } catch (const sky::ProvisionError& e) {
            CHECK(e.attempts().size() == 5);
        }
        b->stop_all();
    }
    SECTION("always with one retry: two rounds of the two offers with a spot market") {
        auto spec = r.spec(always(1));
        auto b = r.backend(spec);
        try {
            b->provision(2, r.emit());
            FAIL("provisioned without capacity");
        } catch (const sky::ProvisionError& e) {
            CHECK(e.attempts().size() == 4);
        }
        b->stop_all();
    }
    CHECK(r.cloud->live() == 0);
}

TEST_CASE(
    "cloud layer: an error that is not about capacity stops provisioning with a "
    "ProvisionError",
    "[cloud]") {
    Run r;
    r.cloud->broken_types.insert("small");
    auto spec = r.spec(never());
    auto b = r.backend(spec);
    CHECK_THROWS_AS(b->provision(2, r.emit()), sky::ProvisionError);
    CHECK(r.cloud->count("launch medium") == 0);
    b->stop_all();
    CHECK(r.cloud->live() == 0);
}

TEST_CASE("cloud layer: a machine whose launch answer was lost is found by the pool's tag and used",
          "[cloud]") {
    Run r;
    r.cloud->lose_launch_answers = 1;
    r.cloud->lost_machine_hidden_lists = 2;  // an eventually consistent list shows it late
    auto spec = r.spec(never(), 2);
    auto b = r.backend(spec);
    b->provision(2, r.emit());
    CHECK(r.cloud->count("launch") == 2);  // sent once each: nothing launched twice
    CHECK(r.cloud->live_types() == std::vector<std::string>{"small", "small"});
    auto provisioned = r.all<sky::InstanceProvisioned>();
    REQUIRE(provisioned.size() == 2);
    CHECK(provisioned[0].instance_id == "fake-1");  // the lost answer's machine, node 0
    CHECK(provisioned[1].instance_id == "fake-2");
    bool said = false;
    for (auto& e : r.all<sky::ErrorEvent>())
        said = said || (e.message.find("answer was lost") != std::string::npos &&
                        e.message.find("fake-1") != std::string::npos);
    CHECK(said);
    b->stop_all();
    CHECK(r.cloud->live() == 0);
}

TEST_CASE(
    "cloud layer: a lost launch answer whose launch started nothing is sent once more after the "
    "wait",
    "[cloud]") {
    Run r;
    r.cloud->lose_launch_requests = 1;  // node 0's first launch
    r.cloud->lost_launch_wait = std::chrono::seconds(1);
    auto spec = r.spec(never(), 2);
    auto b = r.backend(spec);
    const auto t0 = std::chrono::steady_clock::now();
    b->provision(2, r.emit());
    CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::seconds(1));
    CHECK(r.cloud->count("launch small") == 3);
    CHECK(r.cloud->live_types() == std::vector<std::string>{"small", "small"});
    b->stop_all();
    CHECK(r.cloud->live() == 0);
}

TEST_CASE(
    "cloud layer: a node whose launch answers are lost twice moves on to the next offer and "
    "adopts no other node's machine",
    "[cloud]") {
    Run r;
    r.cloud->lose_after = 1;  // node 0's launch is answered, node 1's two are lost
    r.cloud->lose_launch_requests = 2;
    r.cloud->lost_launch_wait = std::chrono::seconds(1);
    auto spec = r.spec(never(), 2);
    auto b = r.backend(spec);
    const auto t0 = std::chrono::steady_clock::now();
    b->provision(2, r.emit());
    CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::seconds(2));
    // The small offer gave up (its node 0 terminated), the medium one started both.
    CHECK(r.cloud->count("launch small") == 3);
    CHECK(r.cloud->count("terminate fake-1") == 1);
    CHECK(r.cloud->live_types() == std::vector<std::string>{"medium", "medium"});
    auto launching = r.all<sky::InstanceLaunching>();
    REQUIRE(launching.size() == 2);
    CHECK(launching[1].instance_type == "medium");
    b->stop_all();
    CHECK(r.cloud->live() == 0);
}

TEST_CASE(
    "cloud layer: a lost launch's machine that shows only after the wait is ended as a stray "
    "once the nodes run",
    "[cloud]") {
    Run r;
    r.cloud->lose_launch_answers = 1;
    r.cloud->lost_machine_hidden_lists = 3;  // the lookup's lists (0, 0.5 and 1 s) miss it
    r.cloud->lost_launch_wait = std::chrono::seconds(1);
    sky::test::TempSkyHome home;
    auto ledger = sky::detail::Ledger::open("pool1", "fakecloud", "");
    auto spec = r.spec(never(), 1);
    auto b = sky::detail::descriptor_for(spec.provider)
                 .make_backend(sky::detail::BackendContext{spec, "pool1", ledger.get()});
    b->provision(1, r.emit());
    // Sent again (fake-2 is the node); fake-1 showed in the next list and was ended.
    CHECK(r.cloud->count("launch small") == 2);
    CHECK(r.cloud->count("terminate fake-1") == 1);
    CHECK(r.cloud->live_types() == std::vector<std::string>{"small"});
    CHECK(r.all<sky::InstanceProvisioned>().at(0).instance_id == "fake-2");
    bool said = false;
    for (auto& e : r.all<sky::ErrorEvent>())
        said = said || (e.message.find("fake-1") != std::string::npos &&
                        e.message.find("terminated") != std::string::npos);
    CHECK(said);
    b->stop_all();
    ledger->close();
    CHECK(r.cloud->live() == 0);
    CHECK_FALSE(sky::detail::Ledger::read(ledger->file()).leaves_something());
}

TEST_CASE("cloud layer: closing the pool ends a launch round that waits for capacity", "[cloud]") {
    Run r;
    for (auto t : {"small", "medium"}) r.cloud->spot_capacity[t] = 0;
    auto spec = r.spec(sky::Spot::Always{.retries = 100, .interval = std::chrono::seconds(1)}, 1);
    auto b = r.backend(spec);
    auto started = std::chrono::steady_clock::now();
    auto f = std::async(std::launch::async, [&] { b->provision(1, r.emit()); });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    b->begin_stop();
    REQUIRE(f.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
    CHECK_THROWS_AS(f.get(), sky::ProvisionError);
    CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(10));
    b->stop_all();
    CHECK(r.cloud->live() == 0);
}

TEST_CASE("cloud layer: the boot script arms the power-off only where the cloud wants it",
          "[cloud]") {
    sky::detail::BootScriptOptions o;
    o.pool_id = "p1";
    o.host_key = {"-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n-----END OPENSSH PRIVATE KEY-----",
                  "ssh-ed25519 AAAAC3 sky-host"};
    o.hard_timeout = std::chrono::seconds(3600);
    const std::string on = sky::detail::boot_script(o);
    CHECK(on.find("<<'SKY_HOST_KEY'\n-----BEGIN OPENSSH PRIVATE KEY-----") != std::string::npos);
    CHECK(on.find("\nsky_power_off_minutes=70\n") != std::string::npos);  // hard timeout + 10 min
    CHECK(on.find("/etc/sky/power-off-on-expiry") != std::string::npos);
    o.power_off = false;  // machines the user keeps (CloudLogin::power_off_on_expiry)
    const std::string off = sky::detail::boot_script(o);
    CHECK(off.find("SKY_HOST_KEY") != std::string::npos);
    CHECK(off.find("\nsky_power_off_minutes=0\n") != std::string::npos);
}

TEST_CASE(
    "cloud layer: live offers are the only candidates, the catalog fills in what they leave "
    "out",
    "[cloud]") {
    auto row = [](std::string type, double price, std::optional<double> spot) {
        sky::Offer o;
        o.provider = "aws";
        o.instance_type = std::move(type);
        o.accelerator = "H100";
        o.accelerator_count = 1;
        o.gpu_memory_gb = 80;
        o.vcpus = 26;
        o.memory_gb = 200;
        o.region = "us-east-1";
        o.on_demand_price = price;
        o.spot_price = spot;
        o.prices_date = "2025-01-15";
        return o;
    };
    const sky::Catalog embedded({row("listed", 2.0, 1.0), row("retired", 1.0, 0.5)});
    sky::Offer live;
    live.instance_type = "listed";  // the cloud names the type and its market, nothing more
    live.region = "us-east-1";
    live.spot_available = true;
    live.prices_date = "2026-11-26";
    const sky::Catalog c = sky::detail::pool_offers(embedded, {live}, "aws");
    REQUIRE(c.offers().size() == 1);  // "retired" is cheaper, but the cloud does not list it
    const sky::Offer& o = c.offers()[0];
    CHECK(o.provider == "aws");
    CHECK(o.instance_type == "listed");
    CHECK(o.accelerator == "H100");
    CHECK(o.accelerator_count == 1);
    CHECK(o.vcpus == 26);
    CHECK(o.on_demand_price == 2.0);
    CHECK(o.spot_price == std::optional<double>(1.0));
    CHECK(o.prices_date == "2025-01-15");  // the price's date, not the listing's
    // The cloud could not be asked: the catalog's rows.
    CHECK(sky::detail::pool_offers(embedded, {}, "aws").offers().size() == 2);
}

TEST_CASE(
    "cloud layer: a type the cloud refuses as unknown moves to the next offer at once, never "
    "on demand",
    "[cloud]") {
    Run r;
    r.cloud->unknown_types.insert("small");
    auto spec = r.spec(sky::Spot::IfAvailable{});
    auto b = r.backend(spec);
    b->provision(2, r.emit());
    CHECK(r.cloud->live_types() == std::vector<std::string>{"medium", "medium"});
    CHECK(r.cloud->count("launch small") == 1);  // neither on demand nor for the second node
    b->stop_all();
    CHECK(r.cloud->live() == 0);
}

TEST_CASE("cloud layer: an offer without spot capacity puts its other nodes on demand at once",
          "[cloud]") {
    Run r;
    r.cloud->spot_capacity["small"] = 0;
    auto spec = r.spec(sky::Spot::IfAvailable{}, 3);
    auto b = r.backend(spec);
    b->provision(3, r.emit());
    CHECK(r.cloud->count("launch small spot") == 1);
    CHECK(r.cloud->count("launch small on-demand") == 3);
    b->stop_all();
    CHECK(r.cloud->live() == 0);
}

TEST_CASE("cloud layer: ProvisionError names each attempt once", "[cloud]") {
    Run r;
    r.cloud->unknown_types.insert("small");
    r.cloud->spot_capacity["medium"] = 0;
    r.cloud->capacity["medium"] = 0;
    r.cloud->capacity["large"] = 0;
    auto spec = r.spec(sky::Spot::IfAvailable{});
    auto b = r.backend(spec);
    try {
        b->provision(2, r.emit());
        FAIL("provisioned without capacity");
    } catch (const sky::ProvisionError& e) {
        const std::string what = e.what();
        INFO(what);
        REQUIRE(e.attempts().size() == 4);  // small, medium spot, medium on demand, large
        auto lines = [&](const std::string& s) {
            int n = 0;
            for (auto at = what.find(s); at != std::string::npos; at = what.find(s, at + 1)) ++n;
            return n;
        };
        CHECK(lines("\n  - fakecloud small in fake-1") == 1);
        CHECK(lines("\n  - fakecloud medium in fake-1 (spot)") == 1);
        CHECK(lines("\n  - fakecloud medium in fake-1:") == 1);
        CHECK(lines("\n  - fakecloud large in fake-1:") == 1);
        CHECK(lines("\n") == 4);
    }
    b->stop_all();
    CHECK(r.cloud->live() == 0);
}

TEST_CASE("cloud layer: infrastructure still in use is deleted again with backoff", "[cloud]") {
    Run r;
    r.cloud->infra_busy_deletes = 2;  // a terminated machine's interface holds the firewall
    sky::test::TempSkyHome home;
    auto ledger = sky::detail::Ledger::open("pool1", "fakecloud", "");
    auto spec = r.spec(never(), 1);
    auto b = sky::detail::descriptor_for(spec.provider)
                 .make_backend(sky::detail::BackendContext{spec, "pool1", ledger.get()});
    b->provision(1, r.emit());
    const auto started = std::chrono::steady_clock::now();
    b->stop_all();
    CHECK(r.cloud->count("delete_infra pool1") == 3);
    CHECK(r.cloud->infra.empty());
    CHECK(std::chrono::steady_clock::now() - started >= std::chrono::seconds(2));  // 1 s, 2 s...
    CHECK(sky::detail::Ledger::read(ledger->file()).infra_left.empty());
}

TEST_CASE(
    "cloud layer: credentials the cloud refuses are asked nothing again: one create, one list, "
    "one delete round, and the ledger names what is left",
    "[cloud]") {
    Run r;
    r.cloud->refuse = [] {
        throw sky::detail::CredentialsRefused("fakecloud: HTTP 401 unauthorized: token expired");
    };
    sky::test::TempSkyHome home;
    auto ledger = sky::detail::Ledger::open("pool1", "fakecloud", "");
    auto spec = r.spec(never(), 1);
    auto b = sky::detail::descriptor_for(spec.provider)
                 .make_backend(sky::detail::BackendContext{spec, "pool1", ledger.get()});
    CHECK_THROWS_AS(b->provision(1, r.emit()), sky::ProvisionError);
    b->stop_all();
    ledger->close();
    CHECK(r.cloud->count("create_infra pool1") == 1);  // not asked again
    CHECK(r.cloud->count("launch") == 0);
    CHECK(r.cloud->count("list pool1") == 1);
    CHECK(r.cloud->count("delete_infra pool1") == 1);  // one round, not rounds for 10 s
    auto rec = sky::detail::Ledger::read(ledger->file());
    CHECK(rec.infra_left == std::vector<std::string>{"firewall fw-pool1: cannot tell (refused)"});

    // The control: an error that is not a refusal (a flaky API) is asked again, twice.
    Run flaky;
    int calls = 0;
    flaky.cloud->refuse = [&calls] {
        if (++calls <= 2) throw std::runtime_error("HTTP 503: try again");
    };
    auto spec2 = flaky.spec(never(), 1);
    auto b2 = flaky.backend(spec2);
    b2->provision(1, flaky.emit());
    CHECK(flaky.cloud->count("create_infra pool1") == 3);
    {
        std::lock_guard lk(flaky.cloud->m);
        flaky.cloud->refuse = nullptr;  // the API answers again: teardown deletes at once
    }
    b2->stop_all();
    CHECK(flaky.cloud->infra.empty());
    CHECK(flaky.cloud->live() == 0);
}

TEST_CASE(
    "cloud layer: infrastructure left after infra_wait is in the ledger, and a later sweep "
    "deletes it",
    "[cloud]") {
    Run r;
    r.cloud->infra_busy_deletes = -1;  // in use until released
    r.cloud->infra_wait = std::chrono::seconds(1);
    sky::test::TempSkyHome home;
    auto ledger = sky::detail::Ledger::open("pool1", "fakecloud", "");
    auto spec = r.spec(never(), 1);
    auto b = sky::detail::descriptor_for(spec.provider)
                 .make_backend(sky::detail::BackendContext{spec, "pool1", ledger.get()});
    b->provision(1, r.emit());
    b->stop_all();
    ledger->close();
    CHECK(r.cloud->live() == 0);
    auto rec = sky::detail::Ledger::read(ledger->file());
    REQUIRE(rec.infra_left == std::vector<std::string>{"firewall fw-pool1: in use"});
    CHECK(rec.closed);
    CHECK(rec.leaves_something());

    // Later (`sky gc`): the interface is gone, the firewall goes.
    {
        std::lock_guard lk(r.cloud->m);
        r.cloud->infra_busy_deletes = 0;
    }
    FakeCloud adapter(r.cloud);
    CHECK(sky::detail::delete_infra_until_gone(adapter, "pool1", std::chrono::seconds(5)).empty());
    CHECK(r.cloud->infra.empty());
}

TEST_CASE(
    "cloud layer: a spot machine taken back is preempted, an on-demand one the cloud takes back "
    "is lost",
    "[cloud]") {
    for (const bool spot : {true, false}) {
        INFO((spot ? "spot" : "on demand"));
        Run r;
        auto spec = r.spec(spot ? always() : never(), 1);
        auto b = r.backend(spec);
        b->provision(1, r.emit());
        const std::string id = r.all<sky::InstanceProvisioned>().at(0).instance_id;
        r.cloud->preempt(id);  // the cloud says: taken back
        const sky::detail::NodeExit ex = b->exit_reason(0);
        CHECK(ex.reason == (spot ? sky::NodeLostError::Reason::preempted
                                 : sky::NodeLostError::Reason::unreachable));
        CHECK(ex.detail.find(id) != std::string::npos);
        b->stop_all();
        CHECK(r.cloud->live() == 0);
    }
}

TEST_CASE(
    "cloud layer: a host key the cloud reports is pinned instead of the boot script's, for "
    "clouds that cannot run the script",
    "[cloud]") {
    for (const bool reported : {false, true}) {
        Run r;
        if (reported) r.cloud->reported_host_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIReported";
        auto spec = r.spec(never(), 1);
        std::string pinned;
        auto b = sky::detail::make_cloud_backend(
            std::make_unique<FakeCloud>(r.cloud),
            sky::detail::BackendContext{spec, "pool1", nullptr},
            [&](const sky::detail::NodeStartRequest& s, const std::function<void(sky::Event)>&)
                -> std::unique_ptr<sky::detail::NodeHandle> {
                pinned = s.machine.host_public_key;
                throw std::runtime_error("the starter saw what it needed");
            });
        b->provision(1, r.emit());
        CHECK_THROWS_WITH(b->connect(0, r.emit()), "the starter saw what it needed");
        if (reported)
            CHECK(pinned == "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIReported");
        else
            CHECK((pinned.rfind("ssh-ed25519 ", 0) == 0 &&
                   pinned.find("Reported") == std::string::npos));  // the boot script's key
        b->stop_all();
        CHECK(r.cloud->live() == 0);
    }
}
