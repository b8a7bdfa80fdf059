// api.md section 2b's scale: many calls in flight cost no threads. Ten thousand co_awaited calls
// from one thread on a 64-node Local pool, and the client's threads with 256 Local nodes, idle
// and while broadcasts, gathers and maps run.
#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

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

TEST_CASE(
    "async scale: a 256-node Local pool runs its broadcasts, gathers and maps on at most 16 "
    "client threads",
    "[async][scale]") {
    // Samples the thread count from before the pool starts until its calls have run (the
    // sampler itself not counted), and which threads there were at the most.
    std::atomic<bool> done{false};
    int most = 0;
    std::string names_at_most;
    std::set<std::string> seen;  // every thread id seen: threads made and ended count too
    std::thread sampler([&] {
        while (!done.load()) {
            for (auto& e : std::filesystem::directory_iterator("/proc/self/task"))
                seen.insert(e.path().filename().string());
            const int n = threads() - 1;
            if (n > most) {
                most = n;
                names_at_most.clear();
                for (auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
                    std::ifstream comm(e.path() / "comm");
                    std::string name;
                    std::getline(comm, name);
                    names_at_most += name + " ";
                }
            }
            std::this_thread::sleep_for(200us);
        }
    });
    struct Join {  // also when a REQUIRE ends the test
        std::atomic<bool>& done;
        std::thread& t;
        ~Join() {
            done = true;
            if (t.joinable()) t.join();
        }
    } join{done, sampler};
    // The defaults a program has (metrics collected), without the display's 256-node log.
    sky::ComputePool pool{sky::PoolSpec{.nodes = 256, .display = sky::Display::quiet}};
    REQUIRE(pool.instance_count() == 256);
    for (int round = 0; round < 3; ++round) {
        std::vector<int> nodes = sky::compute<node_index>() | pool;
        CHECK(nodes.size() == 256);
        std::vector<sky::PendingCompute<int>> calls;
        for (int i = 0; i < 1024; ++i) calls.push_back(sky::compute<inc>(i));
        const std::vector<int> gathered = sky::gather(std::move(calls)) >> pool;
        CHECK(gathered.size() == 1024);
        std::vector<int> rows(4096);
        for (int i = 0; i < 4096; ++i) rows[i] = i;
        const auto mapped = sky::map<inc>(rows) >> pool;
        REQUIRE(mapped.size() == 4096);
        CHECK(mapped.back() == 4096);
        // Calls that stay in flight a while on every node, submitted and awaited as they end.
        std::vector<int> slept = sky::compute<sleep_ms>(50) | pool;
        CHECK(slept.size() == 256);
        auto pending = pool.submit(sky::map<sleep_ms>(std::vector<int>(512, 20)));
        std::vector<sky::PendingCompute<int>> more;
        for (int i = 0; i < 512; ++i) more.push_back(sky::compute<inc>(i));
        int finished = 0;
        for (auto& r : pool.as_completed(sky::gather(std::move(more))))
            finished += r.failed() ? 0 : 1;
        CHECK(finished == 512);
        CHECK(pending.get().size() == 512);
    }
    done = true;
    sampler.join();
    WARN("most client threads while the calls ran: "
         << most << " (" << names_at_most << "); threads seen in all: " << seen.size() - 1);
    CHECK(most <= 16);
}
