// sky::emit reaches every live pool's handlers; the error event is an aggregate; a moved-from
// pool says so instead of crashing.
#include <catch2/catch.hpp>
#include <thread>

#include "e2e/local/functions.hpp"
#include "e2e/local/recorder.hpp"

using namespace e2e;

TEST_CASE(
    "sky::emit reaches every live pool's on_event and on<E> handlers and use_callback "
    "guards, from any thread",
    "[local][events]") {
    Recorder a_events, b_errors, global;
    auto a_spec = quiet(1);
    a_spec.on_event = a_events.callback();
    sky::ComputePool a{a_spec};
    std::optional<sky::ComputePool> b{std::in_place, quiet(1)};
    b->on<sky::ErrorEvent>([&](const sky::ErrorEvent& e) { b_errors.add(e); });
    auto guard = sky::use_callback(global.callback());

    std::thread([] { sky::emit(sky::ErrorEvent{"from another thread", "i-7"}); }).join();
    // The use_callback guards have it when emit returns; each pool on its own event thread.
    CHECK(global.first(error_saying("from another thread")));
    CHECK(a_events.wait_for(error_saying("from another thread")));
    CHECK(b_errors.wait_for(error_saying("from another thread")));
    auto got = b_errors.all();
    REQUIRE(got.size() == 1);
    CHECK(std::get<sky::ErrorEvent>(got[0].event).instance_id == "i-7");

    // A pool that ended gets nothing more; the others still do.
    b.reset();
    sky::emit(sky::ErrorEvent{"after b ended", std::nullopt});
    CHECK(a_events.wait_for(error_saying("after b ended")));
    CHECK(b_errors.all().size() == 1);
    // Each receiver got each emitted event once.
    std::size_t in_a = 0, in_global = 0;
    for (auto& s : a_events.all()) in_a += error_saying("from another thread")(s.event);
    for (auto& s : global.all()) in_global += error_saying("from another thread")(s.event);
    CHECK(in_a == 1);
    CHECK(in_global == 1);
}

TEST_CASE(
    "a handler that emits again does not deadlock, and an answer to an emitted event is "
    "emitted in turn",
    "[local][events]") {
    Recorder a_seen, b_seen, global;
    auto a_spec = quiet(1);
    // Pool a answers "ping" with "pong": an answer to an emitted event goes to every receiver.
    a_spec.on_event = [&](const sky::Event& e) -> std::optional<sky::Event> {
        a_seen.add(e);
        if (error_saying("ping")(e)) return sky::ErrorEvent{"pong", std::nullopt};
        return std::nullopt;
    };
    sky::ComputePool a{a_spec};
    auto b_spec = quiet(1);
    b_spec.on_event = b_seen.callback();
    sky::ComputePool b{b_spec};
    // A handler of pool b emits from b's own event thread when it sees "pong".
    b.on<sky::ErrorEvent>([](const sky::ErrorEvent& e) {
        if (e.message == "pong") sky::emit(sky::ErrorEvent{"from a handler", std::nullopt});
    });
    auto guard = sky::use_callback(global.callback());

    sky::emit(sky::ErrorEvent{"ping", std::nullopt});
    for (auto* r : {&a_seen, &b_seen, &global}) {
        CHECK(r->wait_for(error_saying("pong")));
        CHECK(r->wait_for(error_saying("from a handler")));
    }
    // And the pools still work.
    CHECK((sky::compute<add>(1, 1) >> a) == 2);
    CHECK((sky::compute<add>(2, 2) >> b) == 4);
}

TEST_CASE(
    "ComputePool::spec() and on<E>() on a moved-from pool throw sky::Error instead of "
    "crashing",
    "[local][events]") {
    sky::ComputePool pool{quiet(1)};
    sky::ComputePool moved{std::move(pool)};
    CHECK(moved.spec().nodes == 1);
    // NOLINTBEGIN(bugprone-use-after-move): what a moved-from pool does is the point here.
    CHECK_THROWS_AS(pool.spec(), sky::Error);
    CHECK_THROWS_WITH(pool.spec(), Catch::Contains("moved from"));
    CHECK_THROWS_AS(pool.on<sky::LogLine>([](const sky::LogLine&) {}), sky::Error);
    CHECK_THROWS_AS(sky::compute<add>(1, 1) >> pool, sky::Error);
    CHECK_FALSE(pool.is_active());
    CHECK(pool.instance_count() == 0);
    CHECK(pool.instances().empty());
    CHECK(pool.id().empty());
    CHECK_NOTHROW(pool.close());
    // NOLINTEND(bugprone-use-after-move)
    CHECK((sky::compute<add>(1, 1) >> moved) == 2);
}
