// A DigitalOcean pool's network against strangers (security review r4 H1, M5): the pool's cloud
// firewall, made before any droplet and applied by the pool's tag, lets SSH in from the client
// alone and every port from the pool's own droplets alone. The fake DigitalOcean enforces its
// firewalls on the test hosts (nftables in each host's namespace); a third test host is a
// stranger on the same network, probing a port every node listens on.
#include <catch2/catch.hpp>

#include "fakes/digitalocean/fake_digitalocean.hpp"
#include "support/cloud_pool.hpp"
#include "support/network_probe.hpp"

using network_probe::from_namespace_reaches;
using sky::test::FakeDigitalOcean;
using sky::test::FakeDigitalOceanOptions;

namespace {
const std::string kToken = "dop_v1_e2e_firewall_token_8d1e4b";
}  // namespace

TEST_CASE(
    "digitalocean pool: its cloud firewall lets in SSH from the client and every port from "
    "the pool's own droplets, and nobody else",
    "[digitalocean_pool][security]") {
    SKIP_WITHOUT_HOSTS();
    // Three hosts: two droplets, and host 2 (never a droplet) is a stranger on their network.
    sky::test::CloudOnHosts<FakeDigitalOcean> cloud(3, {{"DIGITALOCEAN_TOKEN", kToken}}, kToken,
                                                    FakeDigitalOceanOptions{.token = kToken});
    if (!cloud.fake.enforcing()) {
        WARN("skipped: nft is not installed here: the fake cannot enforce cloud firewalls");
        return;
    }
    const std::string client = network_probe::client_address(cloud.hosts);
    sky::test::ScopedEnv cidr({{"SKY_CLIENT_CIDR", client}});
    {
        sky::ComputePool pool{cloud.pool_spec(sky::DigitalOcean{.endpoint = cloud.fake.endpoint()},
                                              2, "H100", sky::Spot::Never{})};
        const auto firewalls = cloud.fake.firewalls();
        REQUIRE(firewalls.size() == 1);
        const auto& fw = firewalls[0];
        CHECK(fw["name"] == "sky-" + pool.id());
        CHECK(fw["tags"] == nlohmann::json::array({"sky-pool-" + pool.id()}));
        CHECK(fw["inbound_rules"][0]["sources"]["addresses"] ==
              nlohmann::json::array({client + "/32"}));

        const auto ports = sky::compute<network_probe::listen_for>(30) | pool;
        REQUIRE(ports.size() == 2);
        std::vector<std::string> addresses;
        for (const auto& i : pool.instances()) addresses.push_back(i.private_ip.value_or(""));
        REQUIRE(addresses.size() == 2);
        // The pool's own droplets reach each other on any port (rendezvous, collectives).
        CHECK((sky::compute<network_probe::reaches>(addresses[1], ports[1]) >> pool));
        const auto from_each = sky::compute<network_probe::reaches>(addresses[0], ports[0]) | pool;
        for (bool ok : from_each) CHECK(ok);
        for (int node = 0; node < 2; ++node) {
            INFO("node " << node << " at " << addresses[node]);
            // A stranger on the same network reaches neither the port nor SSH.
            CHECK_FALSE(from_namespace_reaches(cloud.hosts.netns(2), addresses[node], ports[node]));
            CHECK_FALSE(
                from_namespace_reaches(cloud.hosts.netns(2), addresses[node], cloud.hosts.port(0)));
            // The client reaches SSH, and nothing else.
            CHECK(from_namespace_reaches("", addresses[node], cloud.hosts.port(0)));
            CHECK_FALSE(from_namespace_reaches("", addresses[node], ports[node]));
        }
    }
    // The firewall goes with the pool.
    CHECK(cloud.fake.firewalls().empty());
    cloud.check_nothing_left();
}
