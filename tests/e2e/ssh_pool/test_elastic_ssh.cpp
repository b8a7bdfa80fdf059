// An elastic sky::SSH pool (api.md §4a) on 2 test hosts: a host is "launched" by starting its
// worker there, so the pool wakes, grows, drains and sleeps within its hosts.
#include <catch2/catch.hpp>
#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "hosts/ssh_provider.hpp"
#include "hosts/test_hosts.hpp"
#include "sky/sky.hpp"

using namespace std::chrono_literals;
using sky::test::TestHosts;

namespace ssh_elastic {
int node_of() { return sky::instance_info().node; }
std::string address_of() { return sky::instance_info().private_addr; }
}  // namespace ssh_elastic

TEST_CASE(
    "ssh pool: an elastic pool wakes, grows to its hosts, drains and sleeps, leaving no worker",
    "[ssh_pool][elastic]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(2);
    sky::PoolSpec spec{.provider = sky::test::ssh_provider(hosts),
                       .nodes = 0,
                       .display = sky::Display::quiet,
                       .autoscale = {.min = 0, .max = 2, .scaledown_window = 2s}};
    {
        sky::ComputePool pool{spec};
        // A lazy start: no worker on any host.
        CHECK(pool.instance_count() == 0);
        CHECK(sky::test::remote_workers() == 0);
        CHECK((sky::compute<ssh_elastic::node_of>() >> pool) == 0);
        CHECK(sky::test::remote_workers() == 1);
        pool.resize(2).get();
        CHECK(pool.instance_count() == 2);
        CHECK(sky::test::remote_workers() == 2);
        // Node i runs on host i.
        CHECK((sky::compute<ssh_elastic::node_of>() | pool) == std::vector<int>{0, 1});
        CHECK((sky::compute<ssh_elastic::address_of>() | pool) ==
              std::vector<std::string>{hosts.address(0), hosts.address(1)});
        // Drained: host 1's worker is stopped, the pool keeps node 0.
        pool.drain(1).get();
        CHECK(pool.instance_count() == 1);
        CHECK(sky::test::wait_until([] { return sky::test::remote_workers() == 1; }, 10s));
        // Idle past the window: zero nodes, no worker, still active; woken again as node 0.
        REQUIRE(sky::test::wait_until([&] { return pool.instance_count() == 0; }, 20s));
        CHECK(sky::test::wait_until([] { return sky::test::remote_workers() == 0; }, 10s));
        CHECK(pool.is_active());
        std::this_thread::sleep_for(1s);  // node 0's end is confirmed a moment after it stops
        CHECK((sky::compute<ssh_elastic::node_of>() >> pool) == 0);
    }
    CHECK(sky::test::wait_until([] { return sky::test::remote_workers() == 0; }, 10s));
}
