// A parallel run over a list whose length is known only at run time (seed 003:
// `results = gather(*[process(x) for x in data]) >> pool`). Build a vector of pending calls, gather
// it, send it once: every call runs in parallel across nodes x concurrency slots, and the results
// come back in input order, one type for all.
//
//   example_gather [--count N]                          # 2 worker processes on this machine
//   example_gather --provider ssh --hosts A,B --identity KEY --known-hosts FILE
#include <example_provider.hpp>
#include <iostream>
#include <numeric>
#include <set>
#include <sky/sky.hpp>
#include <string>
#include <utility>
#include <vector>

namespace work {

// One item of work; the node that ran it travels back with the answer.
struct Processed {
    long input = 0;
    long output = 0;
    int node = 0;

    template <class Archive>
    void serialize(Archive& ar) {
        ar(input, output, node);
    }
};

Processed process(long x) { return {x, x * x, sky::instance_info().node}; }

}  // namespace work

int main(int argc, char** argv) {
    sky::init(argc, argv);  // in a worker process this serves calls and never returns
    try {
        const long count = std::stol(examples::flag(argc, argv, "count", "40"));
        std::vector<long> data(static_cast<std::size_t>(count));
        std::iota(data.begin(), data.end(), 0L);

        sky::ComputePool pool{{.provider = examples::provider_from_args(argc, argv),
                               .nodes = examples::nodes_from_args(argc, argv, 2),
                               .concurrency = 2}};

        // One pending call per element: the count is whatever the data holds.
        std::vector<sky::PendingCompute<work::Processed>> calls;
        calls.reserve(data.size());
        for (long x : data) calls.push_back(sky::compute<work::process>(x));

        std::vector<work::Processed> results = sky::gather(std::move(calls)) >> pool;

        bool in_order = results.size() == data.size();
        long sum = 0;
        std::set<int> nodes;
        for (std::size_t i = 0; i < results.size(); ++i) {
            in_order = in_order && results[i].input == data[i];
            sum += results[i].output;
            nodes.insert(results[i].node);
        }
        std::cout << "gathered " << results.size()
                  << " results, in input order: " << (in_order ? "yes" : "no") << "\n";
        std::cout << "first five:";
        for (std::size_t i = 0; i < 5 && i < results.size(); ++i)
            std::cout << " " << results[i].output;
        std::cout << "\n";
        // 0^2 + 1^2 + ... + (n-1)^2 = (n-1) n (2n-1) / 6
        std::cout << "sum of squares = " << sum << " (expected "
                  << (count - 1) * count * (2 * count - 1) / 6 << ")\n";
        std::cout << "nodes that did work: " << nodes.size() << " of " << pool.instance_count()
                  << "\n";
    } catch (const std::exception& e) {
        std::cerr << "error: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
