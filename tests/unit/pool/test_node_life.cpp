// A node's life (pool/node_life.hpp) without a pool, threads or sockets: which transition leads
// where, what a reconnect window keeps, and what names a node's loss.
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <vector>

#include "pool/node_life.hpp"
#include "support/source_scan.hpp"

using namespace sky::detail;
using namespace std::chrono_literals;

namespace {
const WindowRule rule{30s, 16s};

/// A node whose pool is active.
NodeLife ready() {
    NodeLife l;
    REQUIRE_FALSE(l.started());
    REQUIRE(l.is<life::Ready>());
    return l;
}
}  // namespace

TEST_CASE("node life: starting, an end while starting is kept until the pool is active",
          "[node_life]") {
    NodeLife l;
    CHECK(l.is<life::Starting>());
    CHECK(std::string(l.name()) == "starting");
    l.ended_while_starting("eof", true);
    auto early = l.started();
    REQUIRE(early);
    CHECK(early->why == "eof");
    CHECK(early->protocol_error);
    CHECK(l.is<life::Ready>());
    CHECK_FALSE(l.started());  // once only
}

TEST_CASE("node life: silence is recorded once and names the end", "[node_life]") {
    auto l = ready();
    const auto t0 = LifeClock::now();
    CHECK(l.silent("no heartbeat for 11 s", t0));
    CHECK_FALSE(l.silent("again", t0 + 1s));
    CHECK(l.ended_reason() == "no heartbeat for 11 s");
    NodeLife starting;
    CHECK_FALSE(starting.silent("x", t0));  // only a ready node goes silent
}

TEST_CASE("node life: a drop opens a window from the drop, a second drop keeps it", "[node_life]") {
    auto l = ready();
    const auto t0 = LifeClock::now();
    REQUIRE(l.dropped("eof", t0, rule));
    REQUIRE(l.is<life::Reconnecting>());
    const auto* w = l.window();
    REQUIRE(w);
    CHECK(w->deadline == t0 + 30s);
    CHECK(w->drop_reason == "eof");
    CHECK_FALSE(w->drop_silent);
    CHECK(l.attempt()->attempts == 1);
    CHECK(l.attempt_failed("refused")->resume_error == "refused");
    REQUIRE(l.resumed());
    REQUIRE(l.is<life::Resyncing>());
    // Dropped again before it caught up: the same window, not a new one.
    REQUIRE(l.dropped("eof again", t0 + 20s, rule));
    REQUIRE(l.is<life::Reconnecting>());
    CHECK(l.window()->deadline == t0 + 30s);
    CHECK(l.window()->drop_reason == "eof");
    CHECK(l.window()->attempts == 1);
}

TEST_CASE("node life: a silent node's window opens at the unanswered heartbeat", "[node_life]") {
    auto l = ready();
    const auto t0 = LifeClock::now();
    l.silent("silent", t0);
    REQUIRE(l.dropped("eof", t0 + 12s, rule));
    CHECK(l.window()->deadline == t0 + 16s);
    CHECK(l.window()->drop_reason == "silent");
    CHECK(l.window()->drop_silent);
    CHECK(l.ended_reason().empty());  // the silence moved into the window
}

TEST_CASE("node life: a window that would be closed already is not opened", "[node_life]") {
    auto l = ready();
    const auto t0 = LifeClock::now();
    l.silent("silent", t0);
    CHECK_FALSE(l.dropped("eof", t0 + 20s, rule));
    CHECK(l.is<life::Ready>());
    CHECK(l.ended_reason() == "silent");  // the loss still says why
    CHECK_FALSE(l.window());
}

TEST_CASE("node life: a resync counts the kept answers and ends ready", "[node_life]") {
    auto l = ready();
    const auto t0 = LifeClock::now();
    REQUIRE(l.dropped("eof", t0, rule));
    CHECK_FALSE(l.caught_up(t0));  // not resyncing yet
    REQUIRE(l.resumed());
    l.resumed_answer(true);
    l.resumed_answer(true);
    l.resumed_answer(false);
    auto done = l.caught_up(t0 + 3s);
    REQUIRE(done);
    CHECK(done->resumed_answers == 2);
    CHECK(done->resumed_again == 1);
    CHECK(done->away == 3s);
    CHECK(l.is<life::Ready>());
    CHECK_FALSE(l.window());
}

TEST_CASE("node life: giving up names the loss, a gone worker defers to the backend",
          "[node_life]") {
    const auto t0 = LifeClock::now();
    {
        auto l = ready();
        REQUIRE(l.dropped("eof", t0, rule));
        l.attempt();
        l.attempt();
        const auto why = l.give_up("refused", false, t0 + 30s);
        CHECK(why ==
              "its connection dropped (eof) and could not be resumed within 30 s (2 attempt(s)): "
              "refused");
        CHECK(l.is<life::Lost>());
        CHECK(l.ended_reason() == why);
        CHECK_FALSE(l.attempt());  // no window: an attempt in flight stops
        l.lose();
        CHECK(l.ended_reason() == why);  // the end keeps the reason
    }
    {
        auto l = ready();
        REQUIRE(l.dropped("eof", t0, rule));
        CHECK(l.give_up("no worker", true, t0 + 1s).empty());  // the backend's word counts
    }
    {
        auto l = ready();
        l.silent("silent", t0);
        REQUIRE(l.dropped("eof", t0 + 1s, rule));
        CHECK(l.give_up("no worker", true, t0 + 2s) == "silent");
    }
}

TEST_CASE("node life: lost, replacing, ready again, a stale replacement does not clobber",
          "[node_life]") {
    auto l = ready();
    l.lose();
    CHECK(l.is<life::Lost>());
    CHECK(l.ended_reason().empty());
    l.replace();
    CHECK(l.is<life::Replacing>());
    CHECK(std::string(l.name()) == "replacing");
    l.replaced();
    CHECK(l.is<life::Ready>());
    // A replacement whose connection dropped before it was counted ready keeps its window.
    l.lose();
    l.replace();
    REQUIRE(l.dropped("eof", LifeClock::now(), rule));
    l.replaced();
    CHECK(l.is<life::Reconnecting>());
}

TEST_CASE("node life: only a ready node drains", "[node_life]") {
    auto l = ready();
    CHECK(l.drain());
    CHECK(l.is<life::Draining>());
    CHECK(std::string(l.name()) == "draining");
    CHECK_FALSE(l.drain());
    NodeLife s;
    CHECK_FALSE(s.drain());
}

TEST_CASE("node life: uses no threads, locks or I/O", "[node_life]") {
    // The supervisor's lock guards it, and what a transition means (a reconnect, a resend) is
    // the supervisor's to do: its sources say so.
    for (const char* file : {"src/pool/node_life.hpp", "src/pool/node_life.cpp"}) {
        INFO(file);
        CHECK(sky::test::mentions(std::string(SKY_SOURCE_DIR) + "/" + file,
                                  {"<thread>", "<mutex>", "<condition_variable>", "<future>",
                                   "std::thread", "std::mutex", "sleep_for", "io/", "asio"}) ==
              std::vector<std::string>{});
    }
}
