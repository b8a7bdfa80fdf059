// Load once, use many times (seed 003: `models = load_model(path) @ pool  # Load on all nodes`).
// A worker is a long-lived process: what a call leaves in the worker's memory (a global, a static)
// is there for the next call on that node, until the pool ends. So a broadcast can load a model on
// every node, and later calls use it without sending it again.
//
// The state belongs to the worker process: a node whose worker is restarted (a crash, a replaced
// machine) starts empty, so a call should say so rather than use nothing (see `predict`).
//
//   example_worker_state                                # 2 worker processes on this machine
//   example_worker_state --provider ssh --hosts A,B --identity KEY --known-hosts FILE
#include <example_provider.hpp>
#include <iostream>
#include <mutex>
#include <numeric>
#include <optional>
#include <sky/sky.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace model {

// A stand-in for a model: a name and a weight vector.
struct Model {
    std::string name;
    std::vector<double> weights;
};

// This worker's state. Calls may run on several threads of one worker (concurrency > 1), hence
// the mutex.
std::mutex mutex;
std::optional<Model> loaded;
int predictions = 0;

// "Loads" the model named by `path` on this node and reports its size.
std::size_t load_model(std::string path, std::size_t size) {
    Model m{path, std::vector<double>(size)};
    std::iota(m.weights.begin(), m.weights.end(), 1.0);  // weights 1, 2, 3, ...
    std::lock_guard lock(mutex);
    loaded = std::move(m);
    predictions = 0;
    return loaded->weights.size();
}

// Uses the model loaded by an earlier call: a dot product of the weights and the input.
double predict(std::vector<double> x) {
    std::lock_guard lock(mutex);
    if (!loaded) throw std::logic_error("no model on this node: call load_model first");
    if (x.size() != loaded->weights.size()) throw std::invalid_argument("wrong input size");
    ++predictions;
    return std::inner_product(x.begin(), x.end(), loaded->weights.begin(), 0.0);
}

// How many predictions this node's worker has made since the model was loaded.
int prediction_count() {
    std::lock_guard lock(mutex);
    return predictions;
}

}  // namespace model

int main(int argc, char** argv) {
    sky::init(argc, argv);  // in a worker process this serves calls and never returns
    try {
        sky::ComputePool pool{{.provider = examples::provider_from_args(argc, argv),
                               .nodes = examples::nodes_from_args(argc, argv, 2)}};

        // Before loading, a call finds nothing there.
        try {
            sky::compute<model::predict>(std::vector<double>{1, 1, 1, 1}) >> pool;
        } catch (const sky::RemoteError& e) {
            std::cout << "before loading: " << e.message() << "\n";
        }

        std::vector<std::size_t> sizes =
            sky::compute<model::load_model>(std::string("models/linear-4"), std::size_t{4}) | pool;
        std::cout << "model loaded on " << sizes.size() << " nodes, " << sizes.at(0)
                  << " weights each\n";

        // Twenty predictions spread over the nodes; each uses the weights already there.
        std::vector<sky::PendingCompute<double>> calls;
        for (int i = 0; i < 20; ++i)
            calls.push_back(sky::compute<model::predict>(std::vector<double>{1, 0, 0, double(i)}));
        std::vector<double> ys = sky::gather(std::move(calls)) >> pool;
        bool right = true;
        for (int i = 0; i < 20; ++i) right = right && ys[i] == 1.0 + 4.0 * i;  // w = 1, 2, 3, 4
        std::cout << "predict([1, 0, 0, 3]) = " << ys[3] << "\n";
        std::cout << "all 20 predictions used the loaded weights: " << (right ? "yes" : "no")
                  << "\n";

        // The counters kept on the workers add up to the calls made.
        std::vector<int> counts = sky::compute<model::prediction_count>() | pool;
        std::cout << "predictions counted on the workers: "
                  << std::accumulate(counts.begin(), counts.end(), 0) << "\n";
    } catch (const std::exception& e) {
        std::cerr << "error: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
