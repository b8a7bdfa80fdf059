// bench/async: the I/O core at scale, each figure with a baseline from the same run.
//
//   threads      the client's threads (/proc/self/task) with a 256-node Local pool up, and with
//                an 8-host SSH pool on test hosts (needs root; skipped otherwise), against the
//                same process before any pool
//   co_await     10,000 calls in flight from one thread, each a co_awaited sky::async_run on a
//                64-node Local pool, calls/s; baseline: the same 10,000 calls through blocking
//                pool.submit() then get() from one thread; interleaved, median of the rounds
//
// Usage: async [--quick]   (--quick: fewer rounds, a 64-node pool for the thread row)
#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sky/asio.hpp>
#include <sky/sky.hpp>
#include <string>
#include <thread>
#include <vector>

#ifdef SKY_BENCH_WITH_HOSTS
#include "hosts/test_hosts.hpp"
#endif

namespace bench {
int inc(int x) { return x + 1; }
}  // namespace bench

namespace {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

int threads() {
    int n = 0;
    for ([[maybe_unused]] auto& e : std::filesystem::directory_iterator("/proc/self/task")) ++n;
    return n;
}

sky::PoolSpec local(int nodes) {
    return {.nodes = nodes, .display = sky::Display::quiet, .collect_metrics = false};
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// 10,000 coroutines on one thread, each awaiting its call; seconds for all of them.
double awaited(sky::ComputePool& pool, int calls) {
    asio::io_context ctx(1);
    int right = 0;
    const auto t0 = Clock::now();
    for (int i = 0; i < calls; ++i)
        asio::co_spawn(
            ctx,
            [&, i]() -> asio::awaitable<void> {
                auto call = sky::compute<bench::inc>(i);
                if (co_await sky::async_run(pool, call, asio::use_awaitable) == i + 1) ++right;
            },
            asio::detached);
    ctx.run();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (right != calls) {
        std::fprintf(stderr, "co_await: %d of %d results right\n", right, calls);
        std::exit(1);
    }
    return s;
}

// The same calls through the blocking form: submit all, then get each, from one thread.
double submitted(sky::ComputePool& pool, int calls) {
    const auto t0 = Clock::now();
    std::vector<sky::Future<int>> futures;
    futures.reserve(static_cast<std::size_t>(calls));
    for (int i = 0; i < calls; ++i) futures.push_back(pool.submit(sky::compute<bench::inc>(i)));
    int right = 0;
    for (int i = 0; i < calls; ++i)
        if (futures[static_cast<std::size_t>(i)].get() == i + 1) ++right;
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (right != calls) {
        std::fprintf(stderr, "submit: %d of %d results right\n", right, calls);
        std::exit(1);
    }
    return s;
}

}  // namespace

int main(int argc, char** argv) {
    sky::init(argc, argv);
    const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
    const int big = quick ? 64 : 256;
    const int calls = 10'000;
    const int rounds = quick ? 3 : 9;

    const int before = threads();
    int local_threads = 0;
    double start_s = 0;
    {
        const auto t0 = Clock::now();
        sky::ComputePool pool{local(big)};
        start_s = std::chrono::duration<double>(Clock::now() - t0).count();
        (void)(sky::compute<bench::inc>(0) | pool);  // every connection read and written
        local_threads = threads();
    }

    int ssh_threads = -1;
    std::string ssh_note = "needs root and test hosts";
#ifdef SKY_BENCH_WITH_HOSTS
    if (std::string why; sky::test::TestHosts::available(&why)) {
        sky::test::TestHosts hosts(8);
        sky::SSH ssh;
        for (int i = 0; i < 8; ++i) ssh.hosts.push_back(hosts.address(i));
        ssh.port = hosts.port(0);
        ssh.identity_file = hosts.client_key_path().string();
        ssh.known_hosts = hosts.known_hosts_file().string();
        sky::ComputePool pool{{.provider = ssh, .nodes = 8, .display = sky::Display::quiet}};
        (void)(sky::compute<bench::inc>(0) | pool);
        ssh_threads = threads();
        ssh_note = "";
    } else {
        ssh_note = why;
    }
#endif

    std::vector<double> await_s, submit_s;
    {
        sky::ComputePool pool{local(64)};
        awaited(pool, 1000);  // warm-up: every node's connection and worker
        for (int r = 0; r < rounds; ++r) {
            // Each goes first in every other round.
            if (r % 2) {
                submit_s.push_back(submitted(pool, calls));
                await_s.push_back(awaited(pool, calls));
            } else {
                await_s.push_back(awaited(pool, calls));
                submit_s.push_back(submitted(pool, calls));
            }
        }
    }
    const double aw = calls / median(await_s), sb = calls / median(submit_s);

    std::printf("sky bench/async (Local provider, %d cores)%s\n",
                static_cast<int>(std::thread::hardware_concurrency()), quick ? " [quick]" : "");
    std::printf("%-44s %12s %12s %8s %10s\n", "measure", "sky", "baseline", "ratio", "target");
    std::printf("%-44s %12d %12d %8s %10s\n",
                ("client threads, " + std::to_string(big) + "-node Local pool up").c_str(),
                local_threads, before, "", "<= 16");
    if (ssh_threads >= 0)
        std::printf("%-44s %12d %12d %8s %10s\n", "client threads, 8-host SSH pool up", ssh_threads,
                    before, "", "");
    else
        std::printf("%-44s %12s %12d %8s %10s\n", "client threads, 8-host SSH pool up", "skipped",
                    before, "", "");
    std::printf("%-44s %10.0f/s %10.0f/s %7.2fx %10s\n",
                "10,000 co_awaited calls, one thread, 64 nodes", aw, sb, aw / sb, "");
    std::printf(
        "(baselines: threads of the same process before any pool; the same 10,000 calls through\n"
        " blocking pool.submit() then get() from one thread, interleaved with the co_awaited\n"
        " ones, median of %d rounds each. The %d-node pool started in %.1f s.%s%s)\n",
        rounds, big, start_s, ssh_note.empty() ? "" : " SSH row: ", ssh_note.c_str());
    return 0;
}
