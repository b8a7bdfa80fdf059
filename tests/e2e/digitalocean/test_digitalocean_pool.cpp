// sky::DigitalOcean end to end: the real cloud layer and adapter against the fake DigitalOcean
// API, whose droplets are test hosts with a real sshd (the pinned host key from user_data, the
// account key authorized, the shipped worker).
#include <catch2/catch.hpp>
#include <cstdlib>
#include <set>

#include "fakes/digitalocean/fake_digitalocean.hpp"
#include "providers/digitalocean/digitalocean.hpp"
#include "support/cloud_pool.hpp"

using sky::test::FakeDigitalOcean;
using sky::test::FakeDigitalOceanOptions;

namespace do_pool {

const std::string kToken = "dop_v1_e2e_secret_token_5f2c9a";

// The fake DigitalOcean on n test hosts, DIGITALOCEAN_TOKEN set; pools of H100 droplets.
struct Cloud : sky::test::CloudOnHosts<FakeDigitalOcean> {
    explicit Cloud(int n)
        : CloudOnHosts(n, {{"DIGITALOCEAN_TOKEN", kToken}}, kToken,
                       FakeDigitalOceanOptions{.token = kToken}) {}
    sky::PoolSpec spec(int nodes) {
        // DigitalOcean sells no spot capacity
        return pool_spec(sky::DigitalOcean{.endpoint = fake.endpoint()}, nodes, "H100",
                         sky::Spot::Never{});
    }
};

}  // namespace do_pool

using namespace do_pool;

TEST_CASE("digitalocean pool: 2 H100 droplets run a broadcast and a gather, and none is left",
          "[digitalocean_pool]") {
    SKIP_WITHOUT_HOSTS();
    Cloud cloud(2);
    {
        sky::ComputePool pool{cloud.spec(2)};
        sky::test::check_broadcast_and_gather(pool);
        cloud.check_instances(
            pool, {"digitalocean", "gpu-h100x1-80gb", false}, [&](const sky::Instance& i) {
                CHECK(i.hourly_price == Approx(6.74));  // live, from /v2/sizes
                // The droplet's user_data carried the pinned host key.
                CHECK(cloud.fake.user_data(i.id).find("SKY_HOST_KEY") != std::string::npos);
            });
        CHECK(cloud.fake.alive() == 2);
        REQUIRE(cloud.fake.keys().size() == 1);
        for (const auto& d : cloud.fake.droplets()) {  // its tags name the pool
            const auto& tags = d["tags"];
            CHECK(std::find(tags.begin(), tags.end(), "sky-pool-" + pool.id()) != tags.end());
        }
    }
    CHECK(cloud.fake.keys().empty());
    CHECK(cloud.fake.firewalls().empty());
    CHECK(cloud.fake.auth_failures() == 0);
    cloud.check_nothing_left();  // every droplet deleted, confirmed by the fake
}

TEST_CASE("digitalocean pool: no capacity anywhere is a ProvisionError listing every attempt",
          "[digitalocean_pool]") {
    SKIP_WITHOUT_HOSTS();
    Cloud cloud(1);
    cloud.fake.set_capacity("gpu-h100x1-80gb", 0);
    cloud.fake.set_capacity("gpu-h100x8-640gb", 0);
    // Every H100 size in every region that sells it (live) or the catalog lists.
    std::set<std::string> tried;
    for (const auto& a : sky::test::provision_attempts(cloud.spec(2), 3, "digitalocean")) {
        CHECK_FALSE(a.spot);
        // DigitalOcean's 422: no capacity, or (a catalog row) not sold in that region.
        CHECK((a.error.find("capacity") != std::string::npos ||
               a.error.find("not available in this region") != std::string::npos));
        tried.insert(a.instance_type + "@" + a.region);
    }
    CHECK(tried.count("gpu-h100x1-80gb@nyc2"));
    CHECK(tried.count("gpu-h100x1-80gb@tor1"));
    CHECK(tried.count("gpu-h100x8-640gb@nyc2"));
    CHECK(cloud.fake.alive() == 0);
    CHECK(cloud.fake.keys().empty());
    cloud.events.check_no_secrets();
}

TEST_CASE("digitalocean pool: rate limits (429) are waited out", "[digitalocean_pool]") {
    SKIP_WITHOUT_HOSTS();
    Cloud cloud(1);
    cloud.fake.rate_limit(3);
    {
        sky::ComputePool pool{cloud.spec(1)};
        CHECK((sky::compute<sky::test::pool_functions::square>(7) >> pool) == 49);
    }
    CHECK(cloud.fake.alive() == 0);
}

TEST_CASE(
    "digitalocean pool: sky ls lists what a killed client left (a droplet, its key and cloud "
    "firewall) and sky gc deletes all of it",
    "[digitalocean_pool]") {
    SKIP_WITHOUT_HOSTS();
    Cloud cloud(1);
    auto& fake = cloud.fake;
    ::setenv("DIGITALOCEAN_API_URL", fake.endpoint().c_str(), 1);
    const auto home = cloud.hosts.dir() / "sky-home";  // the CLI's ledgers: not this user's
    ::setenv("SKY_HOME", home.c_str(), 1);
    // What a client killed by SIGKILL mid-pool leaves: its key, its tag and cloud firewall, and
    // a tagged droplet, none ever deleted.
    {
        auto a = sky::detail::make_digitalocean_adapter(sky::DigitalOcean{});
        auto offers = a->live_offers(sky::Catalog::embedded(), {}, [](sky::Event) {});
        sky::LaunchRequest r;
        r.pool_id = "00112233aabbccdd";
        r.name = "sky-00112233aabbccdd";
        r.ssh_public_key =
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeFakeFakeFakeFakeFakeFakeFakeFake sky";
        a->create_infra({r.pool_id, r.name, r.ssh_public_key}, [](sky::Event) {});
        for (const auto& o : offers)
            if (o.instance_type == "s-2vcpu-4gb") r.offer = o;
        r.boot_script = "#!/bin/bash\n";
        (void)a->launch(r);
    }
    REQUIRE(fake.alive() == 1);
    REQUIRE(fake.keys().size() == 1);
    REQUIRE(fake.firewalls().size() == 1);
    auto ls = sky::test::run_command({SKY_CLI_PATH, "ls", "--provider", "digitalocean"});
    INFO(ls.output);
    CHECK(ls.status == 0);
    CHECK(ls.output.find(fake.droplets().at(0)["id"].dump()) != std::string::npos);
    CHECK(ls.output.find(kToken) == std::string::npos);
    auto doctor = sky::test::run_command({SKY_CLI_PATH, "doctor"});
    INFO(doctor.output);
    CHECK(doctor.output.find("DIGITALOCEAN_TOKEN") != std::string::npos);
    CHECK(doctor.output.find(kToken) == std::string::npos);
    // The droplet's pool has no ledger on this machine: only --include-unknown ends it.
    auto gc = sky::test::run_command(
        {SKY_CLI_PATH, "gc", "--provider", "digitalocean", "--include-unknown"},
        std::chrono::seconds(120));
    INFO(gc.output);
    CHECK(sky::test::wait_until([&] { return fake.alive() == 0; }, std::chrono::seconds(30)));
    CHECK(fake.keys().empty());
    CHECK(fake.firewalls().empty());
    ::unsetenv("DIGITALOCEAN_API_URL");
    ::unsetenv("SKY_HOME");
}
