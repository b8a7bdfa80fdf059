// Two pools at once, to compare two accelerators (seeds 002, 003: `MultiPool(ComputePool(...,
// accelerator="T4"), ComputePool(..., accelerator="A100")) as (t4, a100)`, then
// `benchmark() >> t4` and `benchmark() >> a100`). sky::MultiPool provisions its pools in parallel
// (the wait is the slowest pool's, not the sum); if one cannot start, the others are torn down and
// the error is rethrown.
//
// This machine has no GPU, so by default the pools run on sky::Simulated: a cloud in a box that
// picks the catalog's instance type for each accelerator and tells the function, through
// instance_info() and sky::current_accelerator(), what it would have (docs/testing.md); the
// benchmark itself runs on this machine's CPU. --provider picks a real cloud.
//
//   example_multipool                                   # sky::Simulated
//   example_multipool --provider aws                    # a T4 and an A100 instance
#include <chrono>
#include <example_provider.hpp>
#include <iostream>
#include <sky/sky.hpp>
#include <string>
#include <vector>

namespace bench {

struct Result {
    std::string accelerator;  // what the node says it has
    double checksum = 0;      // the same on every node: the same computation
    double seconds = 0;

    template <class Archive>
    void serialize(Archive& ar) {
        ar(accelerator, checksum, seconds);
    }
};

// A small matrix multiplication; a real benchmark would use the GPU through CUDA or libtorch.
Result benchmark(int n) {
    auto acc = sky::current_accelerator();
    std::vector<double> a(n * n), b(n * n), c(n * n, 0.0);
    for (int i = 0; i < n * n; ++i) {
        a[i] = (i % 7) * 0.5;
        b[i] = (i % 5) * 0.25;
    }
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i)
        for (int k = 0; k < n; ++k)
            for (int j = 0; j < n; ++j) c[i * n + j] += a[i * n + k] * b[k * n + j];
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    double sum = 0;
    for (double x : c) sum += x;
    return {acc ? acc->name : "none", sum, took.count()};
}

}  // namespace bench

int main(int argc, char** argv) {
    sky::init(argc, argv);  // in a worker process this serves calls and never returns
    try {
        sky::Provider provider = examples::flag(argc, argv, "provider").empty()
                                     ? sky::Provider{sky::Simulated{.seed = 3}}
                                     : examples::provider_from_args(argc, argv);

        sky::MultiPool multi{sky::PoolSpec{.provider = provider, .accelerator = "T4"},
                             sky::PoolSpec{.provider = provider, .accelerator = "A100"}};
        auto& [t4, a100] = multi;

        for (sky::ComputePool* pool : {&t4, &a100})
            for (const sky::Instance& i : pool->instances())
                std::cout << "pool " << pool->id() << ": " << i.instance_type << "\n";

        bench::Result r1 = sky::compute<bench::benchmark>(120) >> t4;
        bench::Result r2 = sky::compute<bench::benchmark>(120) >> a100;
        std::cout << "t4 pool ran on: " << r1.accelerator << " (" << r1.seconds << " s)\n";
        std::cout << "a100 pool ran on: " << r2.accelerator << " (" << r2.seconds << " s)\n";
        std::cout << "same checksum on both: " << (r1.checksum == r2.checksum ? "yes" : "no")
                  << " (" << r1.checksum << ")\n";
    } catch (const std::exception& e) {
        std::cerr << "error: " << e.what() << "\n";
        return 1;
    }
    return 0;  // both pools are torn down here
}
