// bench/seal: what sealing a worker's stream costs (runtime/auth.hpp, io/sealed.hpp: X25519,
// then AES-256-GCM records both ways), on two Local pools of one node side by side in one run:
// one plain (the baseline), one with SKY_LOCAL_SEAL=1 (the cipher a Slurm pool runs on the
// cluster network, here over the same socket pair, so that only the cipher differs).
//
//   round trip   `>>` of a no-op (median and p99 of the rounds, interleaved)
//   echo 64 MiB  a 64 MiB std::vector<float> there and back (median of the rounds, interleaved)
//   connect      a pool of one node, from its constructor until it is up (median)
//
// Usage: seal [--quick]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sky/sky.hpp>
#include <string>
#include <vector>

namespace bench_seal {
void noop() {}
std::vector<float> echo(std::vector<float> v) { return v; }
}  // namespace bench_seal

namespace {

using Clock = std::chrono::steady_clock;
double us(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

struct Stats {
    double median, p99;
};
Stats stats(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return {v[v.size() / 2], v[std::min(v.size() - 1, v.size() * 99 / 100)]};
}

sky::PoolSpec one_node() { return {.nodes = 1, .display = sky::Display::quiet}; }

// A pool whose workers seal their streams or not (the backend reads SKY_LOCAL_SEAL when it
// starts a worker).
sky::ComputePool make_pool(bool sealed) {
    if (sealed)
        ::setenv("SKY_LOCAL_SEAL", "1", 1);
    else
        ::unsetenv("SKY_LOCAL_SEAL");
    sky::ComputePool p{one_node()};
    ::unsetenv("SKY_LOCAL_SEAL");
    return p;
}

void row(const char* name, double plain, double sealed, const char* unit) {
    std::printf("%-22s %12.1f %12.1f %8.2fx  %s\n", name, plain, sealed, sealed / plain, unit);
}

}  // namespace

int main(int argc, char** argv) {
    sky::init(argc, argv);
    const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
    const int trips = quick ? 200 : 3000;
    const int echoes = quick ? 3 : 15;
    const int connects = quick ? 3 : 9;

    std::vector<double> connect_plain, connect_sealed;
    for (int k = 0; k < connects; ++k)
        for (bool sealed : {false, true}) {
            const auto t0 = Clock::now();
            auto p = make_pool(sealed);
            (sky::compute<bench_seal::noop>() >> p);
            (sealed ? connect_sealed : connect_plain).push_back(us(Clock::now() - t0));
        }

    auto plain = make_pool(false);
    auto sealed = make_pool(true);
    for (int i = 0; i < 100; ++i) {  // warm both
        sky::compute<bench_seal::noop>() >> plain;
        sky::compute<bench_seal::noop>() >> sealed;
    }
    std::vector<double> rt_plain, rt_sealed;
    for (int i = 0; i < trips; ++i)
        for (auto* p : {&plain, &sealed}) {
            const auto t0 = Clock::now();
            sky::compute<bench_seal::noop>() >> *p;
            (p == &plain ? rt_plain : rt_sealed).push_back(us(Clock::now() - t0));
        }

    const std::vector<float> big((64u << 20) / sizeof(float), 1.5f);
    (void)(sky::compute<bench_seal::echo>(big) >> plain);
    (void)(sky::compute<bench_seal::echo>(big) >> sealed);
    std::vector<double> echo_plain, echo_sealed;
    for (int i = 0; i < echoes; ++i)
        for (auto* p : {&plain, &sealed}) {
            const auto t0 = Clock::now();
            const auto back = sky::compute<bench_seal::echo>(big) >> *p;
            const double t = us(Clock::now() - t0);
            if (back.size() != big.size()) {
                std::fprintf(stderr, "echo came back with %zu elements\n", back.size());
                return 1;
            }
            (p == &plain ? echo_plain : echo_sealed).push_back(t);
        }

    const auto rp = stats(rt_plain), rs = stats(rt_sealed);
    const auto ep = stats(echo_plain), es = stats(echo_sealed);
    const auto cp = stats(connect_plain), cs = stats(connect_sealed);
    std::printf("bench/seal: Local, 1 node; plain stream (baseline) vs sealed (AES-256-GCM)\n");
    std::printf("%-22s %12s %12s %9s\n", "", "plain", "sealed", "ratio");
    row("round trip median", rp.median, rs.median, "us");
    row("round trip p99", rp.p99, rs.p99, "us");
    row("echo 64 MiB median", ep.median / 1000, es.median / 1000, "ms");
    std::printf("%-22s %12.0f %12.0f %8.2fx  MiB/s (128 MiB moved per echo)\n", "echo 64 MiB rate",
                128.0 / (ep.median / 1e6), 128.0 / (es.median / 1e6),
                (128.0 / (es.median / 1e6)) / (128.0 / (ep.median / 1e6)));
    row("connect median", cp.median / 1000, cs.median / 1000, "ms");
    std::printf("(%d round trips, %d echoes, %d connects each, interleaved)\n", trips, echoes,
                connects);
    return 0;
}
