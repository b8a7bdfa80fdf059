// A cloud pool's teardown happens once, before the pool's owner goes on: the cloud is a
// user-defined one (sky::CloudAdapter: the in-memory tests/fakes/cloud), whose call log shows
// every request the pool made and when.
#include <catch2/catch.hpp>
#include <chrono>
#include <mutex>
#include <thread>

#include "e2e/local/functions.hpp"
#include "fakes/cloud/fake_cloud.hpp"
#include "support/temp_home.hpp"

TEST_CASE("a cloud pool whose start failed asks the cloud nothing after its constructor has thrown",
          "[local][cloud]") {
    // The pool's close() stops the backend; its destructor, run by whichever thread drops the
    // pool last, must not sweep again: a list call and seconds of retries against a cloud the
    // program may have moved on from, racing with what it does next (its exit, a setenv).
    auto cloud = std::make_shared<sky::test::FakeCloudState>();
    cloud->broken_types = {"small", "medium", "large"};  // every launch fails, not for capacity
    sky::test::TempSkyHome home;
    sky::PoolSpec spec = e2e::quiet(2);
    spec.provider = sky::test::FakeCloud{cloud};
    spec.spot = sky::Spot::Never{};
    CHECK_THROWS_AS(sky::ComputePool(spec), sky::ProvisionError);
    std::size_t calls = 0;
    {
        std::lock_guard lk(cloud->m);
        calls = cloud->log.size();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    {
        std::lock_guard lk(cloud->m);
        INFO("calls after the throw: " << cloud->log.size() - calls);
        CHECK(cloud->log.size() == calls);
    }
    CHECK(cloud->count("list ") == 1);  // the one sweep by tag, in close()
    CHECK(cloud->count("delete_infra ") == 1);
    CHECK(cloud->live() == 0);
}
