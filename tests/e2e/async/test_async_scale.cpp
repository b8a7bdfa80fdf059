// api.md section 2b's scale: many calls in flight cost no threads. Ten thousand co_awaited calls
// from one thread on a 64-node Local pool, and the client's threads with 256 Local nodes.
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <catch2/catch.hpp>
#include <thread>

#include "functions.hpp"

namespace asio = boost::asio;
using namespace asynctest;
using namespace std::chrono_literals;

TEST_CASE("async scale: 10,000 co_awaited calls from one thread on 64 Local nodes",
          "[async][scale]") {
    sky::ComputePool pool{local(64)};
    const int before = threads();
    asio::io_context ctx(1);  // one thread: this one
    constexpr int calls = 10'000;
    int finished = 0, right = 0, in_flight = 0, most_in_flight = 0;
    for (int i = 0; i < calls; ++i)
        asio::co_spawn(
            ctx,
            [&, i]() -> asio::awaitable<void> {
                auto call = sky::compute<inc>(i);
                ++in_flight;
                most_in_flight = std::max(most_in_flight, in_flight);
                const int r = co_await sky::async_run(pool, call, asio::use_awaitable);
                --in_flight;
                ++finished;
                if (r == i + 1) ++right;
            },
            asio::detached);
    const auto until = std::chrono::steady_clock::now() + 240s;
    while (!ctx.stopped() && std::chrono::steady_clock::now() < until) ctx.run_for(100ms);
    CHECK(finished == calls);
    CHECK(right == calls);
    // Every coroutine started its call before the first result was handled: all in flight at
    // once, from this one thread, and the pool added no thread for them.
    CHECK(most_in_flight == calls);
    CHECK(threads() <= before);
}

TEST_CASE("async scale: a 256-node Local pool runs on at most 16 client threads",
          "[async][scale]") {
    sky::ComputePool pool{local(256)};
    CHECK(pool.instance_count() == 256);
    // Calls on every node, so that every connection has read and written.
    std::vector<int> nodes = sky::compute<node_index>() | pool;
    REQUIRE(nodes.size() == 256);
    CHECK(nodes.back() == 255);
    const int n = threads();
    INFO("client threads with 256 Local nodes: " << n);
    CHECK(n <= 16);
}
