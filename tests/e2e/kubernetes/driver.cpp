// A program written from api.md §5c that owns a Kubernetes pool and is interrupted by the tests:
//   sky_kubernetes_driver KUBECONFIG IMAGE NODES
// It prints "ready <pool id>" once the pool runs, then blocks in a long remote call on every
// node until a signal ends it.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sky/sky.hpp>
#include <string>
#include <thread>

int nap(int seconds) {
    std::this_thread::sleep_for(std::chrono::seconds(seconds));
    return seconds;
}

int main(int argc, char** argv) {
    sky::init(argc, argv);  // first: in a worker this serves calls and exits
    if (argc != 4) {
        std::fprintf(stderr, "usage: %s KUBECONFIG IMAGE NODES\n", argv[0]);
        return 2;
    }
    sky::ComputePool pool{{
        .provider = sky::Kubernetes{.kubeconfig = argv[1], .image = argv[2]},
        .nodes = std::atoi(argv[3]),
        .display = sky::Display::quiet,
        .collect_metrics = false,
    }};
    std::printf("ready %s\n", pool.id().c_str());
    std::fflush(stdout);
    const auto r = sky::compute<nap>(600) | pool;
    std::printf("finished %zu\n", r.size());
    return 0;
}
