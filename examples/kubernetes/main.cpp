// A pool of pods on a Kubernetes cluster you already have (docs/api.md §5c, docs/providers.md
// "Kubernetes"): nothing is installed in the cluster; the program itself is shipped into the pods
// through the API server. Run it against your cluster:
//   ./example_kubernetes [CONTEXT [NAMESPACE [IMAGE]]]
// (empty arguments: the kubeconfig's current context and namespace, Ubuntu 24.04), or
//   ./example_kubernetes --local
// for the same program on worker processes of this machine (what ctest runs).
#include <cstdio>
#include <sky/sky.hpp>
#include <string>
#include <vector>

int square(int x) { return x * x; }

std::string where() {
    const auto i = sky::instance_info();
    return i.hostname + " at " + i.private_addr;
}

int main(int argc, char** argv) {
    sky::init(argc, argv);  // first: in a pod this program is the worker
    const bool local = argc > 1 && std::string(argv[1]) == "--local";
    auto arg = [&](int i) { return argc > i ? std::string(argv[i]) : std::string(); };
    sky::PoolSpec spec;
    if (local)
        spec.provider = sky::Local{};
    else
        spec.provider = sky::Kubernetes{.context = arg(1), .ns = arg(2), .image = arg(3),
                                        .labels = {{"team", "examples"}}};
    spec.nodes = 2;
    spec.display = sky::Display::quiet;
    sky::ComputePool pool{spec};
    for (const auto& w : sky::compute<where>() | pool) std::printf("node: %s\n", w.c_str());
    const std::vector<int> squares = sky::map<square>(std::vector<int>{1, 2, 3, 4}) >> pool;
    int sum = 0;
    for (int s : squares) sum += s;
    std::printf("sum of squares = %d\n", sum);
    return 0;
}
