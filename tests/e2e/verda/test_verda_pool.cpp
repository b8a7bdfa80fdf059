// sky::Verda end to end: the real cloud layer and adapter against the fake Verda API, whose
// instances are test hosts with a real sshd (the pinned host key from the startup script, the
// registered SSH key authorized, the shipped worker).
#include <catch2/catch.hpp>

#include "fakes/verda/fake_verda.hpp"
#include "support/cloud_pool.hpp"

using sky::test::FakeVerda;
using sky::test::FakeVerdaOptions;

namespace verda_pool {

const std::string kId = "verda-e2e-client";
const std::string kSecret = "verda-e2e-secret-7d1e55c0";

// The fake Verda on n test hosts, VERDA_CLIENT_ID and VERDA_CLIENT_SECRET set; pools of H100s.
struct Cloud : sky::test::CloudOnHosts<FakeVerda> {
    explicit Cloud(int n)
        : CloudOnHosts(n, {{"VERDA_CLIENT_ID", kId}, {"VERDA_CLIENT_SECRET", kSecret}}, kSecret,
                       FakeVerdaOptions{.client_id = kId, .client_secret = kSecret}) {}
    sky::PoolSpec spec(int nodes) {
        return pool_spec(sky::Verda{.endpoint = fake.endpoint()}, nodes, "H100");
    }  // spot "always", the default
};

}  // namespace verda_pool

using namespace verda_pool;

TEST_CASE("verda pool: 2 spot H100 instances run a broadcast and a gather, and none is left",
          "[verda_pool]") {
    SKIP_WITHOUT_HOSTS();
    Cloud cloud(2);
    {
        sky::ComputePool pool{cloud.spec(2)};
        sky::test::check_broadcast_and_gather(pool);
        cloud.check_instances(pool, {"verda", "1H100.80S.30V", true}, [](const sky::Instance& i) {
            CHECK(i.hourly_price == Approx(0.89));  // the live spot price
        });
        CHECK(cloud.fake.alive() == 2);
        CHECK(cloud.fake.ssh_keys().size() == 1);
        CHECK(cloud.fake.scripts().size() == 2);  // one startup script per node (its own host key)
        // The access token expires while the pool runs: teardown renews it and goes on.
        cloud.fake.expire_tokens();
    }
    CHECK(cloud.fake.ssh_keys().empty());
    CHECK(cloud.fake.scripts().empty());
    CHECK(cloud.fake.refreshes() >= 1);
    cloud.check_nothing_left();
}

TEST_CASE(
    "verda pool: no availability anywhere is a ProvisionError that says so, and no type is asked "
    "for or ordered",
    "[verda_pool]") {
    SKIP_WITHOUT_HOSTS();
    Cloud cloud(1);
    for (const auto& t : FakeVerda::default_types())
        cloud.fake.set_available(t["instance_type"], false, false);
    try {
        sky::ComputePool pool{cloud.spec(2)};
        FAIL("a pool came up without availability");
    } catch (const sky::ProvisionError& e) {
        INFO(e.what());
        CHECK(std::string(e.what()).find("nothing is available now") != std::string::npos);
        CHECK(e.attempts().empty());
    }
    // The listing said so: no type's availability is asked one by one, none is ordered (the
    // catalog's types, which Verda never listed, least of all).
    for (const auto& r : cloud.fake.http().requests())
        CHECK(r.target.find("/instance-availability/") == std::string::npos);
    CHECK(cloud.fake.http().count("POST", "/v1/instances") == 0);
    CHECK(cloud.fake.alive() == 0);
    CHECK(cloud.fake.ssh_keys().empty());
    CHECK(cloud.fake.scripts().empty());
    cloud.events.check_no_secrets();
}

TEST_CASE("verda pool: a reclaimed spot instance is replaced and calls with .retries(1) complete",
          "[verda_pool]") {
    SKIP_WITHOUT_HOSTS();
    Cloud cloud(2);
    {
        sky::ComputePool pool{cloud.spec(2)};
        sky::test::check_replacement(pool, [&](const std::string& id) { cloud.fake.preempt(id); });
    }
    cloud.check_replaced_and_ended();
}
