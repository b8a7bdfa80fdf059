// A real rendezvous from the variables sky's torch plugin sets: the worker's own code (the GPU
// plan, free ports, the interface of the head's address, rendezvous_env) lays out one node as a
// pool would, and each rank runs `python3 SCRIPT` with exactly those variables, the way a worker
// process sets them around a distributed call. Built and run by tests/device/nccl_rendezvous.sh
// on a GPU machine that has PyTorch (it need not have sky's other dependencies).
//
//   nccl_rendezvous BACKEND SCRIPT [RANKS]
//
// RANKS defaults to the worker processes the node would run (one per GPU or MIG slice).
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "metrics/metrics.hpp"
#include "runtime/protocol.hpp"
#include "runtime/rendezvous.hpp"
#include "sky/distributed.hpp"

using namespace sky::detail;

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: %s BACKEND SCRIPT [RANKS]\n", argv[0]);
        return 2;
    }
    const std::string backend = argv[1];
    const char* script = argv[2];
    const WorkerPlan plan = detect_worker_plan(std::nullopt);
    const int ranks = argc > 3 ? std::atoi(argv[3]) : plan.workers;
    if (ranks < 1 || ranks > 64) {
        std::fprintf(stderr, "RANKS must be in [1, 64]\n");
        return 2;
    }
    // One node, `ranks` worker processes: what a pool of one node sends in its layout frame.
    PoolLayout layout;
    layout.peers = {"127.0.0.1"};
    layout.workers = {ranks};
    layout.ports = {pick_free_ports(ranks)};
    const std::string iface = interface_for_address(layout.peers.front());
    const PluginSpec plugin = make_plugin(PluginSpec::torch, backend);
    std::printf("plan: %d worker process(es) on this node, %d rank(s), interface '%s'\n",
                plan.workers, ranks, iface.c_str());
    std::vector<pid_t> children;
    for (int w = 0; w < ranks; ++w) {
        const EnvVars env = rendezvous_env(plugin, layout, RankPlace{0, w, iface});
        std::string shown;
        for (const auto& [k, v] : env) shown += " " + k + "=" + v;
        // The plan's device for this worker process, when the ranks are the plan's.
        const bool own_device =
            ranks == plan.workers && static_cast<std::size_t>(w) < plan.devices.size();
        if (own_device)
            shown += " CUDA_VISIBLE_DEVICES=" + plan.devices[static_cast<std::size_t>(w)];
        std::printf("rank %d:%s\n", w, shown.c_str());
        std::fflush(stdout);
        const pid_t pid = ::fork();
        if (pid < 0) {
            std::perror("fork");
            return 1;
        }
        if (pid == 0) {
            for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
            if (own_device)
                ::setenv("CUDA_VISIBLE_DEVICES", plan.devices[static_cast<std::size_t>(w)].c_str(),
                         1);
            ::execlp("python3", "python3", script, static_cast<char*>(nullptr));
            std::perror("python3");
            ::_exit(127);
        }
        children.push_back(pid);
    }
    int failed = 0;
    for (std::size_t w = 0; w < children.size(); ++w) {
        int status = 0;
        ::waitpid(children[w], &status, 0);
        const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (!ok) ++failed;
        std::printf("rank %zu: %s (status %d)\n", w, ok ? "ok" : "FAILED", status);
    }
    std::printf("%s: %d of %d ranks failed\n", failed ? "FAILED" : "passed", failed, ranks);
    return failed ? 1 : 0;
}
