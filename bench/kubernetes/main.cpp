// bench/kubernetes: sky::Kubernetes on the real test cluster (tests/hosts/kubernetes: root and
// its built cache; says "skipped" otherwise), each row against a baseline measured in the same
// run, as the namespaced test user.
//
//   pool start, 2 pods     a ComputePool of 2 pods, from its constructor to its return (the
//                          ConfigMap, the pods, the program shipped through exec, the workers
//                          connected through port-forwards); teardown not counted
//   baseline               the same 2 pods (sky's own manifest and main process) created
//                          through the API directly, from the first POST until both are Running
//                          with an address (polled every 50 ms), no kubectl
//   >> round trip          `sky::compute<echo>(k) >> pool` on a 1-pod pool, median and p90
//   baseline               16 bytes echoed through a raw port-forward (sky's WebSocket client)
//                          to busybox `nc -e cat` in a pod of the same cluster
//
// Usage: kubernetes [--starts N] [--calls N]   (defaults 3 and 200)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <sky/sky.hpp>
#include <string>
#include <thread>
#include <vector>

#include "hosts/kubernetes/kubernetes_cluster.hpp"
#include "io/blocking_stream.hpp"
#include "providers/kubernetes/api.hpp"
#include "providers/kubernetes/pods.hpp"
#include "providers/kubernetes/scripts.hpp"
#include "providers/kubernetes/streaming.hpp"

namespace bench {
int echo(int x) { return x; }
}  // namespace bench

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using nlohmann::json;
namespace k8s = sky::detail::kubernetes;

double ms_since(Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

struct Stats {
    double median = 0, p90 = 0;
};
Stats stats(std::vector<double> v) {
    if (v.empty()) return {};
    std::sort(v.begin(), v.end());
    return {v[v.size() / 2], v[std::min(v.size() - 1, v.size() * 9 / 10)]};
}

sky::PoolSpec spec_of(const sky::test::KubernetesCluster& c, int nodes) {
    sky::PoolSpec s;
    s.provider = sky::Kubernetes{.kubeconfig = c.user_kubeconfig(),
                                 .image = c.env("SKY_KUBE_BASE_IMAGE"),
                                 .queue_timeout = std::chrono::seconds(120)};
    s.nodes = nodes;
    s.display = sky::Display::quiet;
    s.collect_metrics = false;
    return s;
}

// The 2 pods a pool would make, created and waited for directly; deleted after (grace 0).
double direct_start(k8s::KubeApi& api, const std::string& image, int round) {
    const std::string pool = "00000000bench" + std::to_string(100 + round);
    std::vector<std::string> names;
    const auto start = Clock::now();
    for (int i = 0; i < 2; ++i) {
        k8s::PodPlan plan;
        plan.pool_id = pool;
        plan.node = i;
        plan.name = k8s::pod_name(pool, i, "b" + std::to_string(100 + round * 2 + i));
        plan.image = image;
        plan.command = {"bash",
                        "-c",
                        std::string(sky::detail::scripts::pod_main_sh()),
                        "sky-pod",
                        "/tmp/sky-pod-bench",
                        "1800"};
        api.call("POST", api.core("pods"), k8s::pod_manifest(plan));
        names.push_back(plan.name);
    }
    double took = -1;
    for (const auto until = Clock::now() + 120s; Clock::now() < until;) {
        int running = 0;
        for (const auto& n : names) {
            const auto v = k8s::view_pod(api.call("GET", api.core("pods/" + n)));
            running += v.running() && !v.ip.empty();
        }
        if (running == 2) {
            took = ms_since(start);
            break;
        }
        std::this_thread::sleep_for(50ms);
    }
    for (const auto& n : names)
        api.call("DELETE", api.core("pods/" + n),
                 json{{"apiVersion", "v1"}, {"kind", "DeleteOptions"}, {"gracePeriodSeconds", 0}});
    for (const auto until = Clock::now() + 60s; Clock::now() < until;) {
        bool any = false;
        for (const auto& n : names) any = any || api.get_if(api.core("pods/" + n)).has_value();
        if (!any) break;
        std::this_thread::sleep_for(200ms);
    }
    return took;
}

}  // namespace

int main(int argc, char** argv) {
    sky::init(argc, argv);  // first: in a pod this binary is the worker
    int starts = 3, calls = 200;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (std::strcmp(argv[i], "--starts") == 0) starts = std::atoi(argv[i + 1]);
        if (std::strcmp(argv[i], "--calls") == 0) calls = std::atoi(argv[i + 1]);
    }
    std::string why;
    if (!sky::test::KubernetesCluster::available(&why)) {
        std::printf("skipped: %s\n", why.c_str());
        return 0;
    }
    sky::test::KubernetesCluster c(1);
    k8s::KubeconfigRequest r;
    r.kubeconfig = c.user_kubeconfig();
    auto api = k8s::connect_api(r);

    std::vector<double> direct, pooled;
    for (int k = 0; k < starts; ++k) {
        direct.push_back(direct_start(*api, c.env("SKY_KUBE_BASE_IMAGE"), k));
        const auto t = Clock::now();
        {
            sky::ComputePool pool{spec_of(c, 2)};
            pooled.push_back(ms_since(t));
        }
    }

    std::vector<double> rt, raw;
    {
        sky::ComputePool pool{spec_of(c, 1)};
        for (int k = 0; k < 5; ++k) (void)(sky::compute<bench::echo>(k) >> pool);
        for (int k = 0; k < calls; ++k) {
            const auto t = Clock::now();
            if ((sky::compute<bench::echo>(k) >> pool) != k) return 1;
            rt.push_back(ms_since(t));
        }
    }
    c.run_pod("echo", R"(["/usr/local/bin/busybox", "nc", "-ll", "-p", "7000", "-e", "/bin/cat"])");
    {
        k8s::CredentialSource creds(k8s::load_kubeconfig(r));
        sky::detail::io::BlockingStream s(k8s::open_port_forward(creds, c.ns(), "echo", 7000));
        std::vector<std::byte> msg(16, std::byte{'x'}), buf(64);
        const std::span<const std::byte> piece(msg);
        const std::span<const std::byte> pieces[] = {piece};
        for (int k = 0; k < calls + 5; ++k) {
            const auto t = Clock::now();
            s.write_all(pieces);
            std::size_t got = 0;
            while (got < msg.size()) {
                if (!s.wait_readable(10s)) return 1;
                const std::size_t n = s.read_some(buf);
                if (n == 0) return 1;
                got += n;
            }
            if (k >= 5) raw.push_back(ms_since(t));
        }
    }

    const Stats d = stats(direct), p = stats(pooled), a = stats(rt), b = stats(raw);
    std::printf("%-26s %12s %12s %8s\n", "kubernetes (1 node, 1.20)", "median ms", "p90 ms",
                "ratio");
    std::printf("%-26s %12.1f %12.1f %8s\n", "baseline: 2 pods via API", d.median, d.p90, "1.00");
    std::printf("%-26s %12.1f %12.1f %8.2f\n", "sky pool start, 2 pods", p.median, p.p90,
                d.median > 0 ? p.median / d.median : 0.0);
    std::printf("%-26s %12.3f %12.3f %8s\n", "baseline: port-forward echo", b.median, b.p90,
                "1.00");
    std::printf("%-26s %12.3f %12.3f %8.2f\n", ">> round trip, 1 pod", a.median, a.p90,
                b.median > 0 ? a.median / b.median : 0.0);
    std::printf("(%d starts each, %d calls and echoes)\n", starts, calls);
    return 0;
}
