// api.md section 2b on sky::Local, written from the contract: every completion token, handlers on
// their associated executor and never inline, per-operation cancellation, the same typed errors
// as the blocking forms, and sky::async_start.
#include <unistd.h>

#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>
#include <filesystem>
#include <future>
#include <optional>
#include <thread>

#include "functions.hpp"

namespace asio = boost::asio;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace asynctest {

int sleep_ms(int ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    return ms;
}
int node_index() { return sky::instance_info().node; }
void touch(std::string path) {
    if (std::FILE* f = std::fopen(path.c_str(), "w")) std::fclose(f);
}

int threads() {
    int n = 0;
    for ([[maybe_unused]] auto& e : std::filesystem::directory_iterator("/proc/self/task")) ++n;
    return n;
}

}  // namespace asynctest

using namespace asynctest;

namespace {

/// Runs `ctx` until it has no work left, bounded: a hung operation fails the test, not the run.
void run_bounded(asio::io_context& ctx, std::chrono::seconds limit = 60s) {
    ctx.restart();
    const auto until = Clock::now() + limit;
    while (!ctx.stopped() && Clock::now() < until) ctx.run_for(100ms);
    const bool hung = !ctx.stopped();
    ctx.stop();
    REQUIRE_FALSE(hung);
}

}  // namespace

TEST_CASE("async: a callback runs on its executor, after the initiating call returned", "[async]") {
    sky::ComputePool pool{local(2)};
    asio::io_context ctx;  // not running while the call is started
    std::optional<int> got;
    std::exception_ptr error;
    std::thread::id ran_on;
    sky::async_run(pool, sky::compute<add>(2, 3),
                   asio::bind_executor(ctx, [&](std::exception_ptr e, int r) {
                       error = e;
                       got = r;
                       ran_on = std::this_thread::get_id();
                   }));
    // Whatever the pool does meanwhile, the handler waits for its executor.
    std::this_thread::sleep_for(200ms);
    CHECK_FALSE(got);
    run_bounded(ctx);  // returns once the handler ran: the operation kept ctx busy until then
    REQUIRE(got);
    CHECK_FALSE(error);
    CHECK(*got == 5);
    CHECK(ran_on == std::this_thread::get_id());

    // A call that fails at once (a moved-from pool) completes through the executor too.
    sky::ComputePool moved = std::move(pool);
    bool called = false;
    sky::async_run(pool, sky::compute<inc>(1),
                   asio::bind_executor(ctx, [&](std::exception_ptr e, int) {
                       called = true;
                       CHECK_THROWS_AS(std::rethrow_exception(e), sky::Error);
                   }));
    CHECK_FALSE(called);
    run_bounded(ctx);
    CHECK(called);
    CHECK((sky::compute<inc>(1) >> moved) == 2);
}

TEST_CASE("async: a plain callback runs on sky's I/O thread, which refuses to block", "[async]") {
    sky::ComputePool pool{local(1)};
    std::promise<std::string> outcome;
    const auto caller = std::this_thread::get_id();
    sky::async_run(pool, sky::compute<inc>(41), [&](std::exception_ptr e, int r) {
        std::string what = e ? "error" : std::to_string(r);
        what += std::this_thread::get_id() == caller ? " inline" : " elsewhere";
        // Waiting here would stall the connections that deliver results: refused, typed.
        try {
            (void)(sky::compute<inc>(1) >> pool);
            what += ", blocked";
        } catch (const sky::Error& x) {
            what += std::string(", refused: ") + x.what();
        }
        outcome.set_value(what);
    });
    auto f = outcome.get_future();
    REQUIRE(f.wait_for(30s) == std::future_status::ready);
    const std::string what = f.get();
    CHECK_THAT(what, Catch::StartsWith("42 elsewhere, refused: "));
    CHECK_THAT(what, Catch::Contains("I/O thread"));
}

TEST_CASE("async: use_future, with the blocking forms' typed errors", "[async]") {
    sky::ComputePool pool{local(2)};
    std::future<int> ok = sky::async_run(pool, sky::compute<inc>(1), asio::use_future);
    std::future<int> bad = sky::async_run(pool, sky::compute<fail>(7), asio::use_future);
    std::future<int> late =
        sky::async_run(pool, sky::compute<sleep_ms>(5000).timeout(200ms), asio::use_future);
    std::future<void> none = sky::async_run(pool, sky::compute<nothing>(), asio::use_future);
    REQUIRE(ok.wait_for(30s) == std::future_status::ready);
    CHECK(ok.get() == 2);
    try {
        (void)bad.get();
        FAIL("no exception");
    } catch (const sky::RemoteError& e) {
        CHECK(e.message() == "no 7");
        CHECK_THAT(e.type_name(), Catch::Contains("invalid_argument"));
    }
    CHECK_THROWS_AS(late.get(), sky::TimeoutError);
    none.get();
}

TEST_CASE("async: use_awaitable runs everything >> takes, and |", "[async]") {
    sky::ComputePool pool{local(3, 2)};
    asio::io_context ctx;
    bool done = false;
    asio::co_spawn(
        ctx,
        [&]() -> asio::awaitable<void> {
            auto one = sky::compute<add>(20, 22);
            int a = co_await sky::async_run(pool, one, asio::use_awaitable);
            CHECK(a == 42);
            auto batch = sky::compute<inc>(1) & sky::compute<twice>(std::string("ab")) &
                         sky::compute<nothing>();
            auto [x, y, z] = co_await sky::async_run(pool, batch, asio::use_awaitable);
            CHECK(x == 2);
            CHECK(y == "abab");
            STATIC_REQUIRE(std::is_same_v<decltype(z), std::monostate>);
            std::vector<sky::PendingCompute<int>> calls;
            for (int i = 0; i < 50; ++i) calls.push_back(sky::compute<inc>(i));
            auto gather = sky::gather(std::move(calls));
            std::vector<int> v = co_await sky::async_run(pool, gather, asio::use_awaitable);
            REQUIRE(v.size() == 50);
            for (int i = 0; i < 50; ++i) CHECK(v[static_cast<std::size_t>(i)] == i + 1);
            auto who = sky::compute<node_index>();
            std::vector<int> all = co_await sky::async_broadcast(pool, who, asio::use_awaitable);
            CHECK(all == std::vector<int>{0, 1, 2});
            std::vector<int> xs(1000);
            for (int i = 0; i < 1000; ++i) xs[static_cast<std::size_t>(i)] = i;
            auto m = sky::map<inc>(xs).chunk(64);
            std::vector<int> s = co_await sky::async_run(pool, m, asio::use_awaitable);
            REQUIRE(s.size() == 1000);
            CHECK(s.back() == 1000);
            auto void_call = sky::compute<nothing>();
            co_await sky::async_run(pool, void_call, asio::use_awaitable);
            // An error is the same typed exception, thrown at the co_await.
            auto failing = sky::compute<fail>(3);
            try {
                co_await sky::async_run(pool, failing, asio::use_awaitable);
                FAIL("no exception");
            } catch (const sky::RemoteError& e) {
                CHECK(e.message() == "no 3");
            }
            done = true;
        },
        asio::detached);
    run_bounded(ctx);
    CHECK(done);
}

TEST_CASE("async: as_tuple and detached", "[async]") {
    sky::ComputePool pool{local(2)};
    asio::io_context ctx;
    int checked = 0;
    asio::co_spawn(
        ctx,
        [&]() -> asio::awaitable<void> {
            auto good = sky::compute<inc>(9);
            auto [e1, v1] =
                co_await sky::async_run(pool, good, asio::as_tuple(asio::use_awaitable));
            CHECK_FALSE(e1);
            CHECK(v1 == 10);
            ++checked;
            auto bad = sky::compute<fail>(1);
            auto [e2, v2] = co_await sky::async_run(pool, bad, asio::as_tuple(asio::use_awaitable));
            REQUIRE(e2);
            CHECK_THROWS_AS(std::rethrow_exception(e2), sky::RemoteError);
            (void)v2;
            ++checked;
        },
        asio::detached);
    run_bounded(ctx);
    CHECK(checked == 2);

    // Detached: nobody waits, the call still runs.
    const std::string marker = "/tmp/sky-async-detached-" + std::to_string(::getpid()) + ".marker";
    std::filesystem::remove(marker);
    sky::async_run(pool, sky::compute<touch>(marker), asio::detached);
    const auto until = Clock::now() + 30s;
    while (!std::filesystem::exists(marker) && Clock::now() < until)
        std::this_thread::sleep_for(10ms);
    CHECK(std::filesystem::exists(marker));
    std::filesystem::remove(marker);
}

TEST_CASE("async: a handler bound to a strand runs in that strand", "[async]") {
    sky::ComputePool pool{local(2, 4)};
    asio::thread_pool workers(4);
    auto strand = asio::make_strand(workers);
    std::atomic<int> in_strand{0}, outside{0}, results{0};
    std::promise<void> all;
    std::atomic<int> left{40};
    for (int i = 0; i < 40; ++i)
        sky::async_run(pool, sky::compute<inc>(i),
                       asio::bind_executor(strand, [&, i](std::exception_ptr e, int r) {
                           (strand.running_in_this_thread() ? in_strand : outside)++;
                           if (!e && r == i + 1) ++results;
                           if (--left == 0) all.set_value();
                       }));
    REQUIRE(all.get_future().wait_for(30s) == std::future_status::ready);
    CHECK(in_strand == 40);
    CHECK(outside == 0);
    CHECK(results == 40);
    workers.join();
}

TEST_CASE("async: deferred operations compose in a parallel_group", "[async]") {
    sky::ComputePool pool{local(2)};
    asio::io_context ctx;
    SECTION("wait_for_all: both results") {
        std::optional<std::pair<int, std::string>> got;
        asio::experimental::make_parallel_group(
            sky::async_run(pool, sky::compute<inc>(1), asio::deferred),
            sky::async_run(pool, sky::compute<twice>(std::string("x")), asio::deferred))
            .async_wait(
                asio::experimental::wait_for_all(),
                asio::bind_executor(ctx, [&](std::array<std::size_t, 2>, std::exception_ptr e1,
                                             int a, std::exception_ptr e2, std::string b) {
                    CHECK_FALSE(e1);
                    CHECK_FALSE(e2);
                    got.emplace(a, b);
                }));
        run_bounded(ctx);
        REQUIRE(got);
        CHECK(got->first == 2);
        CHECK(got->second == "xx");
    }
    SECTION("wait_for_one: the first result cancels the other call") {
        const auto t0 = Clock::now();
        std::optional<std::array<std::size_t, 2>> order;
        std::exception_ptr slow_error;
        int fast = 0;
        asio::experimental::make_parallel_group(
            sky::async_run(pool, sky::compute<sleep_ms>(60'000), asio::deferred),
            sky::async_run(pool, sky::compute<sleep_ms>(10), asio::deferred))
            .async_wait(
                asio::experimental::wait_for_one(),
                asio::bind_executor(ctx, [&](std::array<std::size_t, 2> o, std::exception_ptr e1,
                                             int, std::exception_ptr e2, int b) {
                    order = o;
                    slow_error = e1;
                    CHECK_FALSE(e2);
                    fast = b;
                }));
        run_bounded(ctx);
        REQUIRE(order);
        CHECK((*order)[0] == 1);
        CHECK(fast == 10);
        REQUIRE(slow_error);
        CHECK_THROWS_AS(std::rethrow_exception(slow_error), sky::CancelledError);
        CHECK(Clock::now() - t0 < 20s);
    }
}

TEST_CASE("async: bind_cancellation_slot cancels the call, whatever the cancellation type",
          "[async]") {
    // Room for the cancelled calls, which the worker may still be running (a call that started
    // is not interrupted; its result is dropped).
    sky::ComputePool pool{local(1, 4)};
    for (auto type : {asio::cancellation_type::terminal, asio::cancellation_type::partial,
                      asio::cancellation_type::total}) {
        asio::io_context ctx;
        asio::cancellation_signal signal;
        std::exception_ptr error;
        bool called = false;
        const auto t0 = Clock::now();
        sky::async_run(pool, sky::compute<sleep_ms>(60'000),
                       asio::bind_cancellation_slot(
                           signal.slot(), asio::bind_executor(ctx, [&](std::exception_ptr e, int) {
                               called = true;
                               error = e;
                           })));
        asio::steady_timer later(ctx, 300ms);
        later.async_wait([&](boost::system::error_code) { signal.emit(type); });
        run_bounded(ctx);
        REQUIRE(called);
        REQUIRE(error);
        CHECK_THROWS_AS(std::rethrow_exception(error), sky::CancelledError);
        CHECK(Clock::now() - t0 < 10s);
    }
    CHECK((sky::compute<inc>(1) >> pool) == 2);
}

TEST_CASE("async: cancelling a co_spawned coroutine cancels the call it awaits", "[async]") {
    sky::ComputePool pool{local(1)};
    asio::io_context ctx;
    asio::cancellation_signal signal;
    std::string outcome;
    asio::co_spawn(
        ctx,
        [&]() -> asio::awaitable<void> {
            auto slow = sky::compute<sleep_ms>(60'000);
            try {
                co_await sky::async_run(pool, slow, asio::use_awaitable);
                outcome = "finished";
            } catch (const sky::CancelledError&) {
                outcome = "cancelled";
            }
        },
        asio::bind_cancellation_slot(signal.slot(), asio::detached));
    asio::steady_timer later(ctx, 300ms);
    later.async_wait(
        [&](boost::system::error_code) { signal.emit(asio::cancellation_type::terminal); });
    const auto t0 = Clock::now();
    run_bounded(ctx);
    CHECK(outcome == "cancelled");
    CHECK(Clock::now() - t0 < 10s);
}

TEST_CASE("async: async_start makes a pool without blocking, or fails typed and empty", "[async]") {
    asio::io_context ctx;
    std::optional<sky::ComputePool> pool;
    std::exception_ptr bad_error;
    bool bad_pool_empty = false;
    asio::co_spawn(
        ctx,
        [&]() -> asio::awaitable<void> {
            // g++ 12 and temporaries in a co_await expression: the spec is named first.
            sky::PoolSpec spec = local(2);
            sky::ComputePool p = co_await sky::async_start(spec, asio::use_awaitable);
            CHECK(p.is_active());
            CHECK(p.instance_count() == 2);
            auto call = sky::compute<add>(1, 2);
            CHECK((co_await sky::async_run(p, call, asio::use_awaitable)) == 3);
            pool.emplace(std::move(p));
        },
        asio::detached);
    sky::PoolSpec bad = local(0);  // nodes = 0: a ConfigError
    sky::async_start(bad, asio::bind_executor(ctx, [&](std::exception_ptr e, sky::ComputePool p) {
                         bad_error = e;
                         bad_pool_empty = !p.is_active() && p.id().empty();
                     }));
    run_bounded(ctx);
    REQUIRE(pool);
    CHECK((sky::compute<inc>(4) >> *pool) == 5);
    REQUIRE(bad_error);
    CHECK_THROWS_AS(std::rethrow_exception(bad_error), sky::ConfigError);
    CHECK(bad_pool_empty);
}

namespace {

/// A value with no default constructor, which the asynchronous layer must hold until it hands it
/// to the handler.
struct Reading {
    explicit Reading(int v) : value(v) {}
    int value;
};

/// One call whose int result becomes a Reading: sky's own initiation (detail::launch) with a
/// value type that has no default constructor.
template <class Token>
auto async_reading(sky::ComputePool& pool, const sky::PendingCompute<int>& p, Token&& token) {
    return asio::async_initiate<Token, sky::detail::async_signature_t<Reading>>(
        [](auto handler, sky::ComputePool* pool, sky::PendingCompute<int> p) {
            sky::detail::launch(
                std::move(handler),
                [&] {
                    return sky::detail::PoolAccess::start(*pool, {&p.desc()},
                                                          sky::detail::BatchKind::calls);
                },
                [](sky::detail::BatchState& s) {
                    return Reading{sky::detail::take<int>(s.outcomes[0])};
                });
        },
        token, &pool, p);
}

}  // namespace

TEST_CASE("async: a value with no default constructor comes as an optional, empty on an error",
          "[async]") {
    static_assert(!std::default_initializable<Reading>);
    static_assert(std::is_same_v<sky::detail::async_signature_t<Reading>,
                                 void(std::exception_ptr, std::optional<Reading>)>);
    // A value with a default keeps the contract's signature.
    static_assert(
        std::is_same_v<sky::detail::async_signature_t<int>, void(std::exception_ptr, int)>);
    sky::ComputePool pool{local(1)};
    asio::io_context ctx;
    struct Seen {
        bool called = false;
        std::exception_ptr error;
        std::optional<Reading> value;
    };
    Seen ok, bad;
    auto into = [&ctx](Seen& seen) {
        return asio::bind_executor(ctx, [&seen](std::exception_ptr e, std::optional<Reading> r) {
            seen.called = true;
            seen.error = e;
            seen.value = std::move(r);
        });
    };
    async_reading(pool, sky::compute<inc>(41), into(ok));
    async_reading(pool, sky::compute<fail>(7), into(bad));
    run_bounded(ctx);
    REQUIRE(ok.called);
    CHECK_FALSE(ok.error);
    REQUIRE(ok.value);
    CHECK(ok.value->value == 42);
    REQUIRE(bad.called);
    REQUIRE(bad.error);
    CHECK_THROWS_AS(std::rethrow_exception(bad.error), sky::RemoteError);
    CHECK_FALSE(bad.value);
}
