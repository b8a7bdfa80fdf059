// The quick start: three worker processes on this machine, every way to run a computation.
#include <iostream>
#include <numeric>
#include <sky/sky.hpp>
#include <string>
#include <vector>

namespace demo {

double mean(std::vector<double> xs) {
    return std::reduce(xs.begin(), xs.end()) / static_cast<double>(xs.size());
}

std::string whoami() {
    auto info = sky::instance_info();
    std::cout << "hello from node " << info.node << " of " << info.total_nodes << std::endl;
    return "node " + std::to_string(info.node);
}

// Each node sums its own shard of the data; together the shards cover every element once.
long shard_sum(std::vector<long> data) {
    auto mine = sky::shard(data);
    return std::accumulate(mine.begin(), mine.end(), 0L);
}

int fails(int x) {
    if (x < 0) throw std::invalid_argument("x must not be negative, got " + std::to_string(x));
    return x;
}

}  // namespace demo

int main(int argc, char** argv) {
    sky::init(argc, argv);  // in a worker process this serves calls and never returns

    sky::ComputePool pool{{.provider = sky::Local{}, .nodes = 3, .concurrency = 2}};

    std::cout << "pool " << pool.id() << " with " << pool.instance_count() << " nodes\n";

    double m = sky::compute<demo::mean>(std::vector<double>{1, 2, 3, 4}) >> pool;
    std::cout << "mean >> pool            = " << m << "\n";

    std::vector<std::string> names = sky::compute<demo::whoami>() | pool;
    std::cout << "whoami | pool           = " << names.size() << " answers\n";

    std::vector<long> data(1000);
    std::iota(data.begin(), data.end(), 1L);
    std::vector<long> sums = sky::compute<demo::shard_sum>(data) | pool;
    std::cout << "sum of shards           = " << std::accumulate(sums.begin(), sums.end(), 0L)
              << " (expected 500500)\n";

    auto [a, b] =
        (sky::compute<demo::mean>(std::vector<double>{1, 3}) & sky::compute<demo::fails>(7)) >>
        pool;
    std::cout << "(mean & fails) >> pool  = " << a << ", " << b << "\n";

    std::vector<sky::PendingCompute<int>> many;
    for (int i = 0; i < 100; ++i) many.push_back(sky::compute<demo::fails>(i));
    std::vector<int> got = sky::gather(std::move(many)) >> pool;
    std::cout << "gather of 100           = sum " << std::accumulate(got.begin(), got.end(), 0)
              << "\n";

    try {
        sky::compute<demo::fails>(-1) >> pool;
    } catch (const sky::RemoteError& e) {
        std::cout << "remote error            = " << e.type_name() << ": " << e.message()
                  << " (node " << e.node() << ")\n";
    }
    return 0;
}
