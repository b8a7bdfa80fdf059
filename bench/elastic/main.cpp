// bench/elastic: what an elastic pool costs in time and saves in money, measured in one run.
//
//   wake         Local: a lazy pool (nodes = 0) from its first call to its first result, against
//                the same call on a pool that is already up (its round trip), and against
//                starting a fixed pool of one and making that call
//   burst        Local: 1,000 short calls (2 ms each) on an elastic pool (min 0, max 8) woken by
//                the burst, against the same burst on a fixed pool of 8 made beforehand (the
//                ratio of wall times; the elastic one includes starting its 8 nodes)
//   bursty cost  Simulated (billed per second at its catalog prices): a trace of 3 bursts of
//                calls separated by idle gaps, on an elastic pool (max 4, a 1 s window) against
//                a fixed pool of 4 (max) for the same trace
//
// Usage: elastic [--quick]   (--quick: a smaller burst and shorter gaps, for a smoke run)
#include <chrono>
#include <cstdio>
#include <cstring>
#include <sky/sky.hpp>
#include <thread>
#include <vector>

namespace bench {
int noop(int x) { return x; }
int work(int ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    return ms;
}
}  // namespace bench

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

double ms_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

sky::PoolSpec local(int nodes, sky::Autoscale a = {}) {
    return {.provider = sky::Local{},
            .nodes = nodes,
            .display = sky::Display::quiet,
            .collect_metrics = false,
            .autoscale = a};
}

double burst(sky::ComputePool& pool, int calls, int ms) {
    std::vector<sky::PendingCompute<int>> v;
    v.reserve(static_cast<std::size_t>(calls));
    for (int i = 0; i < calls; ++i) v.push_back(sky::compute<bench::work>(ms));
    const auto t0 = Clock::now();
    (void)(sky::gather(std::move(v)) >> pool);
    return ms_since(t0);
}

// The trace: `bursts` bursts of `calls` calls of `ms` each, `gap` apart; returns the final cost.
double trace_cost(sky::PoolSpec spec, int bursts, int calls, int ms, std::chrono::seconds gap,
                  double& seconds) {
    double total = 0;
    spec.on_event = [&](const sky::Event& e) -> std::optional<sky::Event> {
        if (auto* f = std::get_if<sky::CostFinal>(&e)) total = f->total_cost;
        return std::nullopt;
    };
    const auto t0 = Clock::now();
    {
        sky::ComputePool pool{spec};
        for (int b = 0; b < bursts; ++b) {
            if (b > 0) std::this_thread::sleep_for(gap);
            (void)burst(pool, calls, ms);
        }
    }
    seconds = ms_since(t0) / 1000.0;
    return total;
}

}  // namespace

int main(int argc, char** argv) {
    sky::init(argc, argv);
    const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
    const int burst_calls = quick ? 200 : 1000;
    try {
        // wake
        double wake = 0, warm = 0, cold_fixed = 0;
        {
            sky::ComputePool lazy{local(0, {.min = 0, .max = 1, .scaledown_window = 60s})};
            const auto t0 = Clock::now();
            (void)(sky::compute<bench::noop>(1) >> lazy);
            wake = ms_since(t0);
            const auto t1 = Clock::now();
            for (int i = 0; i < 100; ++i) (void)(sky::compute<bench::noop>(i) >> lazy);
            warm = ms_since(t1) / 100;
        }
        {
            const auto t0 = Clock::now();
            sky::ComputePool fixed{local(1)};
            (void)(sky::compute<bench::noop>(1) >> fixed);
            cold_fixed = ms_since(t0);
        }
        std::printf("%-12s %-44s %10s %10s %8s\n", "row", "what", "elastic", "baseline", "ratio");
        std::printf("%-12s %-44s %8.1f ms %8.3f ms %7.0fx\n", "wake",
                    "first result from zero vs a warm call", wake, warm, wake / warm);
        std::printf("%-12s %-44s %8.1f ms %8.1f ms %7.2fx\n", "wake",
                    "first result from zero vs start + call", wake, cold_fixed, wake / cold_fixed);

        // burst
        double elastic_ms = 0, fixed_ms = 0;
        {
            sky::ComputePool pool{local(0, {.min = 0, .max = 8, .scaledown_window = 60s})};
            elastic_ms = burst(pool, burst_calls, 2);
        }
        {
            sky::ComputePool pool{local(8)};
            fixed_ms = burst(pool, burst_calls, 2);
        }
        char what[64];
        std::snprintf(what, sizeof what, "%d x 2 ms calls, max 8 (from zero) vs fixed 8",
                      burst_calls);
        std::printf("%-12s %-44s %8.1f ms %8.1f ms %7.2fx\n", "burst", what, elastic_ms, fixed_ms,
                    elastic_ms / fixed_ms);

        // bursty cost
        const auto gap = quick ? 3s : 6s;
        const int calls = quick ? 8 : 16;
        double es = 0, fs = 0;
        const double elastic_cost =
            trace_cost({.provider = sky::Simulated{},
                        .nodes = 0,
                        .spot = sky::Spot::Never{},
                        .display = sky::Display::quiet,
                        .collect_metrics = false,
                        .autoscale = {.min = 0, .max = 4, .scaledown_window = 1s}},
                       3, calls, 250, gap, es);
        const double fixed_cost = trace_cost({.provider = sky::Simulated{},
                                              .nodes = 4,
                                              .spot = sky::Spot::Never{},
                                              .display = sky::Display::quiet,
                                              .collect_metrics = false},
                                             3, calls, 250, gap, fs);
        std::snprintf(what, sizeof what, "3 bursts of %d x 250 ms, %lld s apart: $", calls,
                      static_cast<long long>(gap.count()));
        std::printf("%-12s %-44s %10.6f %10.6f %7.2fx\n", "bursty cost", what, elastic_cost,
                    fixed_cost, elastic_cost / fixed_cost);
        std::printf("%-12s %-44s %8.1f s  %8.1f s  %7.2fx\n", "bursty time",
                    "the same trace's wall time", es, fs, es / fs);
    } catch (const sky::Error& e) {
        std::fprintf(stderr, "bench/elastic: %s\n", e.what());
        return 1;
    }
    return 0;
}
