// bench/catalog: Catalog::select over the embedded catalog against a plain scan of the same
// offers (the baseline: one pass with the simplest test, no sort), measured in one run.
//
// Usage: catalog [--quick]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <sky/catalog.hpp>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

// Median microseconds of `rounds` runs of `f`.
template <class F>
double median_us(int rounds, F&& f) {
    std::vector<double> t;
    t.reserve(static_cast<std::size_t>(rounds));
    for (int i = 0; i < rounds; ++i) {
        auto t0 = Clock::now();
        f();
        t.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
    std::nth_element(t.begin(), t.begin() + static_cast<long>(t.size() / 2), t.end());
    return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
    const int rounds = quick ? 50 : 2000;
    const auto& c = sky::Catalog::embedded();
    const auto& offers = c.offers();
    std::size_t sink = 0;
    struct Case {
        const char* name;
        sky::SelectionRequest request;
    };
    const Case cases[] = {
        {"A100, >= 8 vCPU", {.accelerator = "A100", .cpu = 8}},
        {"H100 x8, 64GB RAM", {.accelerator = "H100:8", .memory = "64GB"}},
        {"cpu only, 4 vCPU", {.cpu = 4}},
    };
    std::printf("%zu offers, median of %d runs\n\n%-22s %12s %14s %8s\n", offers.size(), rounds,
                "request", "select (us)", "plain scan (us)", "matches");
    for (const auto& k : cases) {
        std::size_t n = 0;
        double sel = median_us(rounds, [&] {
            n = c.select(k.request).size();
            sink += n;
        });
        double scan = median_us(rounds, [&] {
            std::size_t m = 0;
            for (const auto& o : offers) m += o.vcpus >= k.request.cpu.value_or(0) ? 1 : 0;
            sink += m;
        });
        std::printf("%-22s %12.1f %14.1f %8zu\n", k.name, sel, scan, n);
    }
    return sink == 0 ? 1 : 0;
}
