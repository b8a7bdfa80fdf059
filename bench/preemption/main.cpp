// bench/preemption: how long a preemption notice takes to reach every rank (api.md §10a), on
// sky::Simulated, against a broadcast round trip on the same pool, in one run.
//
//   notice -> every rank   the simulated cloud warns that a node is reclaimed (each of the 3
//                          nodes in turn, 4 s apart, 1.5 s ahead; a new pool every 3 notices, as
//                          a node is replaced at most 3 times); on each node a call polls
//                          sky::preemption()
//                          every 100 us and returns when it first sees the notice; one notice's
//                          latency is the last rank's time minus when the pool heard of it (the
//                          notice's deadline minus the notice). Median and max over the notices.
//   baseline               a broadcast of a no-op to the same 3 nodes: submit to every answer,
//                          median and max over as many rounds, between the notices
//
//   on SSH test hosts      (built with the test hosts; needs root) sky::AWS over the fake EC2,
//                          whose instances are test hosts, each with a fake instance metadata
//                          service: the metadata announces a spot interruption, the node's
//                          launcher reads it (every 3 s), its worker forwards it, the pool fans
//                          it out. One notice's latency is the last rank's time minus when the
//                          pool heard of it; the way in (announced -> the pool heard) beside it;
//                          the baseline a broadcast no-op on that pool. Median and max.
//
// Usage: preemption [--notices N] [--host-notices M]   (default 10 and 6; a simulated notice
//        takes about 4 s, one on the hosts about 20 s; --host-notices 0 skips the hosts)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <mutex>
#include <sky/sky.hpp>
#include <string>
#include <thread>
#include <vector>

#ifdef SKY_BENCH_PREEMPTION_HOSTS
#include "preemption/hosts.hpp"
#endif

namespace bench {

double now_s() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

// When this rank first saw a notice (system clock, seconds); -1 when none came in `limit_ms`.
double first_sight(int limit_ms) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(limit_ms);
    while (std::chrono::steady_clock::now() < until) {
        if (sky::preemption()) return now_s();
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    return -1;
}

void noop() {}

}  // namespace bench

namespace {

using namespace std::chrono_literals;

struct Stats {
    double median = 0, max = 0;
};
Stats stats(std::vector<double> v) {
    if (v.empty()) return {};
    std::sort(v.begin(), v.end());
    return {v[v.size() / 2], v.back()};
}

}  // namespace

int main(int argc, char** argv) {
    sky::init(argc, argv);
    int n = 10;
    int host_notices = 6;
    for (int i = 1; i + 1 < argc; ++i) {
        if (std::strcmp(argv[i], "--notices") == 0) n = std::max(1, std::atoi(argv[i + 1]));
        if (std::strcmp(argv[i], "--host-notices") == 0)
            host_notices = std::max(0, std::atoi(argv[i + 1]));
    }
    constexpr std::chrono::milliseconds first = 4s, period = 4s, notice = 1500ms;
    // A node is replaced at most 3 times in a pool's life: each pool warns each of its 3 nodes
    // once, and as many pools run as the notices need.
    std::vector<double> notice_ms, call_ms;
    int missed = 0;
    try {
        for (int done = 0; done < n;) {
            const int here = std::min(3, n - done);
            sky::Simulated cloud{.seed = static_cast<std::uint64_t>(done + 1)};
            for (int k = 0; k < here; ++k)
                cloud.faults.push_back(sky::Fault::preempt(k, first + k * period, notice));
            std::mutex m;
            std::vector<double> heard;  // when the pool heard of each notice
            int replaced = 0;
            sky::ComputePool pool{
                {.provider = cloud, .nodes = 3, .spot = "always", .display = sky::Display::quiet}};
            pool.on<sky::PreemptionNotice>([&](const sky::PreemptionNotice& e) {
                std::lock_guard lk(m);
                heard.push_back(
                    std::chrono::duration<double>(e.deadline.time_since_epoch()).count() -
                    std::chrono::duration<double>(notice).count());
            });
            pool.on<sky::InstanceReplaced>([&](const sky::InstanceReplaced&) {
                std::lock_guard lk(m);
                ++replaced;
            });
            for (int k = 0; k < here; ++k, ++done) {
                // The baseline first: nothing stands between a replacement and the next
                // warning.
                const auto t0 = std::chrono::steady_clock::now();
                (void)(sky::compute<bench::noop>() | pool);
                call_ms.push_back(
                    std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                        .count());
                const std::vector<double> seen =
                    sky::compute<bench::first_sight>(static_cast<int>(2 * period.count())) | pool;
                double last = 0;
                for (double x : seen) last = x < 0 ? -1 : (last < 0 ? -1 : std::max(last, x));
                {
                    std::lock_guard lk(m);
                    if (last < 0 || static_cast<int>(heard.size()) != k + 1)
                        ++missed;
                    else
                        notice_ms.push_back((last - heard.back()) * 1000.0);
                }
                // The next round starts once the warned node is back.
                for (int i = 0; i < 3000; ++i) {
                    {
                        std::lock_guard lk(m);
                        if (replaced > k) break;
                    }
                    std::this_thread::sleep_for(10ms);
                }
            }
        }
        const Stats a = stats(notice_ms), b = stats(call_ms);
        std::printf("bench/preemption on sky::Simulated, 3 nodes, %d notices (%d missed)\n\n", n,
                    missed);
        std::printf("| what | median (ms) | max (ms) |\n|---|---|---|\n");
        std::printf("| notice -> every rank | %.2f | %.2f |\n", a.median, a.max);
        std::printf("| baseline: a broadcast no-op round trip | %.2f | %.2f |\n", b.median, b.max);
        std::printf("| ratio | %.2fx | %.2fx |\n", b.median > 0 ? a.median / b.median : 0,
                    b.max > 0 ? a.max / b.max : 0);
        int host_missed = 0;
#ifdef SKY_BENCH_PREEMPTION_HOSTS
        if (host_notices > 0) {
            const auto h = bench::hosts_row(host_notices, SKY_BENCH_TESTDATA_DIR);
            if (!h.skipped.empty()) {
                std::printf("\non SSH test hosts: skipped: %s\n", h.skipped.c_str());
            } else {
                host_missed = h.missed;
                const Stats x = stats(h.notice_ms), y = stats(h.call_ms), z = stats(h.probe_ms);
                std::printf(
                    "\nbench/preemption on SSH test hosts (sky::AWS over the fake EC2, IMDSv2 "
                    "on each host), 3 nodes, %d notices (%d missed)\n\n",
                    host_notices, h.missed);
                std::printf("| what | median (ms) | max (ms) |\n|---|---|---|\n");
                std::printf("| notice -> every rank | %.2f | %.2f |\n", x.median, x.max);
                std::printf("| baseline: a broadcast no-op round trip | %.2f | %.2f |\n", y.median,
                            y.max);
                std::printf("| ratio | %.2fx | %.2fx |\n", y.median > 0 ? x.median / y.median : 0,
                            y.max > 0 ? x.max / y.max : 0);
                std::printf("| the way in: metadata announced -> the pool heard | %.2f | %.2f |\n",
                            z.median, z.max);
            }
        }
#else
        (void)host_notices;
#endif
        return missed == 0 && host_missed == 0 ? 0 : 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench/preemption: %s\n", e.what());
        return 1;
    }
}
