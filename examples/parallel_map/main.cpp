// A parallel map: the seeds' JoblibPool, `Parallel(n_jobs=-1)(delayed(f)(x) for x in data)`, in
// C++, and results saved as they arrive. Runs on sky::Local unless --provider says otherwise.
#include <cmath>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <numeric>
#include <sky/sky.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "example_provider.hpp"

namespace demo {

// An element can be any type cereal can serialize.
struct Row {
    int id = 0;
    std::vector<double> features;
    template <class A>
    void serialize(A& ar) {
        ar(id, features);
    }
};

// The function to map: called once per element, with the fixed arguments after it.
double score(const Row& r, double weight) {
    return weight * std::accumulate(r.features.begin(), r.features.end(), 0.0);
}

double checked_sqrt(double x) {
    if (x < 0) throw std::domain_error("negative input " + std::to_string(x));
    return std::sqrt(x);
}

}  // namespace demo

int main(int argc, char** argv) {
    sky::init(argc, argv);  // in a worker process this serves calls and never returns

    // Python: with JoblibPool(provider=..., nodes=3, concurrency=2) as pool:
    sky::ComputePool pool{{.provider = examples::provider_from_args(argc, argv),
                           .nodes = examples::nodes_from_args(argc, argv, 3),
                           .concurrency = 2}};

    std::cout << std::fixed << std::setprecision(1);
    std::vector<demo::Row> rows;
    for (int i = 0; i < 1000; ++i) rows.push_back({i, {double(i), double(i + 1)}});

    // Python: scores = Parallel(n_jobs=-1)(delayed(score)(r, 0.5) for r in rows)
    // Every element runs remotely, in chunks (several per slot), results in input order.
    std::vector<double> scores = sky::map<demo::score>(rows, 0.5) >> pool;
    std::cout << "sum of " << scores.size()
              << " scores = " << std::accumulate(scores.begin(), scores.end(), 0.0)
              << " (row i scores i + 0.5)\n";

    // 100 elements per call, each chunk re-run on another node if its node is lost.
    auto again = sky::map<demo::score>(rows, 2.0).chunk(100).retries(1) >> pool;
    std::cout << "scores[999] with weight 2 = " << again[999] << "\n";

    // A long job saves each result as it arrives (chunk by chunk), not when all are done.
    std::ofstream saved("parallel_map_scores.txt");
    std::size_t count = 0;
    double total = 0;
    for (auto& done : pool.as_completed(sky::map<demo::score>(rows, 1.0).chunk(50))) {
        saved << done.index << " " << done.get() << "\n";
        total += done.get();
        ++count;
    }
    std::cout << "saved " << count << " results as they arrived, total " << total << "\n";

    // An element that throws fails alone: get() rethrows that element's error, as a
    // sky::RemoteError whose message names the element.
    for (auto& done :
         pool.as_completed(sky::map<demo::checked_sqrt>(std::vector{4.0, -1.0, 9.0}))) {
        try {
            double root = done.get();
            std::cout << "sqrt of element " << done.index << " = " << root << "\n";
        } catch (const sky::RemoteError& e) {
            std::cout << "element " << done.index << " failed: " << e.message() << "\n";
        }
    }
    // With >>, the first failing element is rethrown once every chunk has finished.
    try {
        sky::map<demo::checked_sqrt>(std::vector{1.0, -2.0}) >> pool;
    } catch (const sky::RemoteError& e) {
        std::cout << "map >> pool threw: " << e.message() << "\n";
    }
    std::remove("parallel_map_scores.txt");
    return 0;
}
