// Events: compose, emit, use_callback (scoped), describe.
#include <catch2/catch.hpp>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "sky/events.hpp"

TEST_CASE("use_callback receives emitted events while its guard lives", "[events]") {
    std::vector<std::string> seen;
    {
        auto guard = sky::use_callback([&](const sky::Event& e) -> std::optional<sky::Event> {
            seen.push_back(sky::describe(e));
            return std::nullopt;
        });
        sky::emit(sky::InstanceStopping{"i-1"});
    }
    sky::emit(sky::InstanceStopping{"i-2"});  // guard gone: not seen
    REQUIRE(seen.size() == 1);
    CHECK(seen[0].find("i-1") != std::string::npos);
}

TEST_CASE("an event a callback returns is dispatched in turn, with a bound", "[events]") {
    int stops = 0, errors = 0;
    auto guard = sky::use_callback([&](const sky::Event& e) -> std::optional<sky::Event> {
        if (std::holds_alternative<sky::PoolStopping>(e)) {
            ++stops;
            return sky::ErrorEvent{"derived", std::nullopt};
        }
        if (std::holds_alternative<sky::ErrorEvent>(e)) {
            ++errors;
            return sky::ErrorEvent{"again", std::nullopt};  // would loop forever without a bound
        }
        return std::nullopt;
    });
    sky::emit(sky::PoolStopping{});
    CHECK(stops == 1);
    CHECK(errors >= 1);
    CHECK(errors <= 10);
}

TEST_CASE("compose calls each callback in order and keeps the first answer", "[events]") {
    std::string order;
    auto a = [&](const sky::Event&) -> std::optional<sky::Event> {
        order += "a";
        return sky::InstanceStopping{"from-a"};
    };
    auto b = [&](const sky::Event&) -> std::optional<sky::Event> {
        order += "b";
        return sky::InstanceStopping{"from-b"};
    };
    sky::Callback both = sky::compose(a, b);
    auto r = both(sky::PoolStopping{});
    CHECK(order == "ab");
    REQUIRE(r);
    CHECK(std::get<sky::InstanceStopping>(*r).instance_id == "from-a");
}

TEST_CASE("every event type has a readable description", "[events]") {
    sky::Event all[] = {sky::InfraCreating{},
                        sky::InfraCreated{"us-east-1"},
                        sky::InstanceLaunching{2, "p5.48xlarge", "aws"},
                        sky::InstanceProvisioned{"i-1", 0, true, "aws", "1.2.3.4", "p5", 1.0, 0.5},
                        sky::BootstrapStarting{"i-1"},
                        sky::BootstrapProgress{"i-1", "apt"},
                        sky::BootstrapCompleted{"i-1"},
                        sky::PoolStarted{"p", 2},
                        sky::LogLine{1, "i-1", "hello", 0},
                        sky::Metrics{"i-1", 0, 10, 20, 100, 1000},
                        sky::InstancePreempted{"i-1", 0, "spot"},
                        sky::InstanceReplaced{"i-1", "i-2", 0},
                        sky::PoolStopping{},
                        sky::InstanceStopping{"i-1"},
                        sky::CostUpdate{10, 0.1, 3.0, 1, 1},
                        sky::CostFinal{1, 2, 3, 1, 1, 0.5},
                        sky::events::Error{"boom", "i-1"}};
    for (auto& e : all) CHECK_FALSE(sky::describe(e).empty());
    CHECK(sky::describe(sky::LogLine{1, "i", "hello", 0}) == "[node 1] hello");
}

TEST_CASE("no empty region in an event's description", "[events]") {
    CHECK(sky::describe(sky::InfraCreated{"us-east-1"}) == "infrastructure ready in us-east-1");
    // Clouds that place each machine (RunPod, Vast.ai, a Verda pool with no location).
    CHECK(sky::describe(sky::InfraCreated{""}) == "infrastructure ready");
}

TEST_CASE("the error event is the aggregate sky::ErrorEvent, apart from the exceptions",
          "[events]") {
    // An aggregate like every other event: built with braces, also under the seeds' name.
    sky::Event e = sky::ErrorEvent{"node 1 lost", "i-1"};
    auto* err = std::get_if<sky::ErrorEvent>(&e);
    REQUIRE(err);
    CHECK(err->message == "node 1 lost");
    CHECK(err->instance_id == "i-1");
    static_assert(std::is_aggregate_v<sky::ErrorEvent>);
    static_assert(std::is_same_v<sky::events::Error, sky::ErrorEvent>);
    sky::events::Error seeds_name{"no capacity", std::nullopt};
    CHECK_FALSE(seeds_name.instance_id);
    CHECK(sky::describe(seeds_name) == "error: no capacity");
    // sky::Error stays the base of the exceptions, and is not an event.
    static_assert(!std::is_constructible_v<sky::Event, sky::Error>);
    static_assert(std::is_base_of_v<sky::Error, sky::ConfigError>);
    static_assert(std::is_base_of_v<std::runtime_error, sky::Error>);
}
