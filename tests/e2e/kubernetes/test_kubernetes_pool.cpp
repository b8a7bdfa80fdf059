// sky::Kubernetes end to end on a real cluster (tests/hosts/kubernetes: etcd, kube-apiserver,
// controller-manager, scheduler, a kubelet with containerd and runc), as a user with only a
// namespaced Role: programs written from api.md §5c run pools of pods, and what the tests check
// is what a user and a cluster admin see: results from the pods, the scheduler's words when
// nothing fits, a replacement after an eviction, the RBAC refusal, and no pod and no ConfigMap
// left after the pool, a SIGINT, or a kill -9 and `sky gc`.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "hosts/kubernetes/kubernetes_cluster.hpp"
#include "sky/sky.hpp"
#include "support/child_process.hpp"
#include "support/crash_expect.hpp"
#include "support/scoped_env.hpp"
#include "support/temp_home.hpp"

extern char** environ;
namespace fs = std::filesystem;
using sky::test::KubernetesCluster;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

namespace kube_pool {

int add(int a, int b) { return a + b; }
int square(int x) { return x * x; }
int nap(int seconds) {
    std::this_thread::sleep_for(std::chrono::seconds(seconds));
    return seconds;
}
int plus_one(int x) { return x + 1; }

int* volatile null_target = nullptr;

// Not inlined into sky's call wrapper: the frame the test looks for is the function's own.
__attribute__((noinline)) int write_through_null(int x) {
    std::cout << "crashing in the pod" << std::endl;
    *null_target = x;  // SIGSEGV here
    return x;
}
const int null_write_line = __LINE__ - 3;

// A training loop of api.md §10a, `step_ms` a step, each step reported with sky::progress as it
// begins; at a notice each rank goes on to the agreed step, "saves" it and returns (bounded: 2
// minutes). Steps longer than the reports' period (a second) keep the ranks within a step of
// what the pool last heard, as a collective's ranks are: then every rank saves the agreed step.
struct StepResult {
    int node = -1;
    std::int64_t checkpoint_step = -2;  // as the notice said
    std::int64_t seen_at_step = -2;     // the step at which this rank first saw it
    std::int64_t saved = -2;            // the step it saved
    std::string instance_id;
    double deadline = 0;  // system clock, seconds

    template <class A>
    void serialize(A& ar) {
        ar(node, checkpoint_step, seen_at_step, saved, instance_id, deadline);
    }
};

StepResult step_loop(int step_ms) {
    StepResult r;
    r.node = sky::instance_info().node;
    const auto until = Clock::now() + 120s;
    for (std::int64_t step = 0; Clock::now() < until; ++step) {
        sky::progress(step);
        std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));
        const auto p = sky::preemption();
        if (!p) continue;
        if (r.seen_at_step == -2) {
            r.seen_at_step = step;
            r.checkpoint_step = p->checkpoint_step;
            r.instance_id = p->instance_id;
            r.deadline = std::chrono::duration<double>(p->deadline.time_since_epoch()).count();
        }
        if (step >= p->checkpoint_step) {
            r.saved = step;
            return r;
        }
    }
    return r;
}

std::string where() {
    const auto i = sky::instance_info();
    return std::to_string(i.node) + " " + i.private_addr + " " + i.hostname;
}

// The pool's objects as the admin sees them: pods and ConfigMaps with sky's label.
std::size_t count_of(const KubernetesCluster& c, const std::string& resource) {
    const json j =
        json::parse(c.api("GET", "/api/v1/namespaces/sky-test/" + resource +
                                     "?labelSelector=app.kubernetes.io%2Fmanaged-by%3Dsky"));
    return j.value("items", json::array()).size();
}

// Nothing of sky's in the namespace (pods may take a few seconds to be confirmed gone by the
// time a killed client's objects are collected: bounded).
void check_nothing_left(const KubernetesCluster& c) {
    const auto until = Clock::now() + 30s;
    while (Clock::now() < until && (count_of(c, "pods") || count_of(c, "configmaps")))
        std::this_thread::sleep_for(500ms);
    CHECK(count_of(c, "pods") == 0);
    CHECK(count_of(c, "configmaps") == 0);
}

sky::PoolSpec spec_of(const KubernetesCluster& c, int nodes) {
    sky::PoolSpec s;
    s.provider = sky::Kubernetes{.kubeconfig = c.user_kubeconfig(),
                                 .image = c.env("SKY_KUBE_BASE_IMAGE"),
                                 .queue_timeout = std::chrono::seconds(60)};
    s.nodes = nodes;
    s.display = sky::Display::quiet;
    s.collect_metrics = false;
    return s;
}

// A program of this test binary's own (support/child_process.hpp).
using Child = sky::test::ChildProcess;

}  // namespace kube_pool

using namespace kube_pool;

TEST_CASE(
    "kubernetes pool: two pods as a namespaced user run broadcast, gather and map, "
    "instance_info has the pod addresses, a segfault in a pod comes back with its stack, and "
    "leaving deletes every pod and the ConfigMap",
    "[kubernetes][e2e]") {
    SKIP_WITHOUT_KUBERNETES();
    KubernetesCluster c(1);
    {
        sky::ComputePool pool{spec_of(c, 2)};
        INFO(c.logs());
        // While it runs: two pods and the one ConfigMap that owns them.
        CHECK(count_of(c, "pods") == 2);
        CHECK(count_of(c, "configmaps") == 1);
        const std::vector<int> sums = sky::compute<add>(2, 3) | pool;
        CHECK(sums == std::vector<int>{5, 5});
        auto [x, y] = sky::gather(sky::compute<add>(1, 1), sky::compute<square>(7)) >> pool;
        CHECK(x == 2);
        CHECK(y == 49);
        const std::vector<int> squares = sky::map<square>(std::vector<int>{1, 2, 3, 4}) >> pool;
        CHECK(squares == std::vector<int>{1, 4, 9, 16});
        const auto seen = sky::compute<where>() | pool;
        const auto instances = pool.instances();
        REQUIRE(instances.size() == 2);
        REQUIRE(seen.size() == 2);
        for (std::size_t k = 0; k < 2; ++k) {
            INFO(seen[k]);
            CHECK(instances[k].provider == "kubernetes");
            CHECK(instances[k].id.rfind("sky-" + pool.id() + "-n" + std::to_string(k) + "-", 0) ==
                  0);
            REQUIRE(instances[k].private_ip);
            // The pod's own address, as the cluster gave it (not loopback).
            CHECK(instances[k].private_ip->rfind("127.", 0) != 0);
            CHECK(seen[k].rfind(std::to_string(k) + " " + *instances[k].private_ip + " ", 0) == 0);
            // A pod's host name is its name.
            CHECK(seen[k].find(instances[k].id) != std::string::npos);
        }
        // A call that segfaults in a pod: the worker's crash report comes back through exec,
        // symbolized from the client's copy of the program; the worker is restarted in the
        // same pod.
        try {
            sky::compute<write_through_null>(3) >> pool;
            FAIL("no exception");
        } catch (const sky::NodeLostError& e) {
            sky::test::expect_null_write(e, "kube_pool::write_through_null",
                                         "test_kubernetes_pool.cpp", null_write_line,
                                         "crashing in the pod");
        }
        CHECK((sky::compute<plus_one>(1) >> pool) == 2);
        // The crashed node rejoins (its restart runs beside the next calls): bounded wait.
        auto after = pool.instances();
        for (const auto until = Clock::now() + 60s; after.size() != 2 && Clock::now() < until;
             after = pool.instances())
            std::this_thread::sleep_for(200ms);
        REQUIRE(after.size() == 2);
        CHECK(after[0].id == instances[0].id);
        CHECK(after[1].id == instances[1].id);
    }
    check_nothing_left(c);
}

TEST_CASE(
    "kubernetes pool: a GPU no node advertises ends in a ProvisionError quoting the scheduler "
    "within queue_timeout, with its message as an event, and nothing left",
    "[kubernetes][e2e]") {
    SKIP_WITHOUT_KUBERNETES();
    KubernetesCluster c(1);
    sky::PoolSpec s = spec_of(c, 1);
    s.provider = sky::Kubernetes{.kubeconfig = c.user_kubeconfig(),
                                 .image = c.env("SKY_KUBE_BASE_IMAGE"),
                                 .queue_timeout = std::chrono::seconds(8)};
    s.accelerator = "T4";
    std::vector<std::string> steps;
    std::mutex m;
    s.on_event = [&](const sky::Event& e) -> std::optional<sky::Event> {
        if (const auto* p = std::get_if<sky::BootstrapProgress>(&e)) {
            std::lock_guard lk(m);
            steps.push_back(p->step);
        }
        return std::nullopt;
    };
    const auto start = Clock::now();
    std::string what;
    try {
        sky::ComputePool pool{s};
        FAIL("the pool started on a node with no GPU");
    } catch (const sky::ProvisionError& e) {
        what = e.what();
    }
    const auto took = Clock::now() - start;
    INFO(what);
    CHECK(what.find("Insufficient nvidia.com/gpu") != std::string::npos);
    CHECK(what.find("queue_timeout 8 s") != std::string::npos);
    CHECK(took < 40s);
    bool said = false;
    for (const auto& st : steps)
        said = said || (st.rfind("schedule: ", 0) == 0 &&
                        st.find("Insufficient nvidia.com/gpu") != std::string::npos);
    CHECK(said);
    check_nothing_left(c);
}

TEST_CASE(
    "kubernetes pool: an eviction through the API during a retries(1) call is replaced and the "
    "call returns",
    "[kubernetes][e2e]") {
    SKIP_WITHOUT_KUBERNETES();
    KubernetesCluster c(1);
    {
        sky::PoolSpec s = spec_of(c, 1);
        std::atomic<int> preempted{0}, replaced{0};
        s.on_event = [&](const sky::Event& e) -> std::optional<sky::Event> {
            if (std::holds_alternative<sky::InstancePreempted>(e)) ++preempted;
            if (std::holds_alternative<sky::InstanceReplaced>(e)) ++replaced;
            return std::nullopt;
        };
        sky::ComputePool pool{s};
        const std::string first = pool.instances().at(0).id;
        auto call = pool.submit(sky::compute<nap>(8).retries(1));
        std::this_thread::sleep_for(3s);  // the call runs in the pod
        // With a grace period of 1 s: the pod (which otherwise serves on for its 60 s, the
        // ranks' time to save at the notice) is killed under the running call.
        c.api("POST", "/api/v1/namespaces/sky-test/pods/" + first + "/eviction",
              json{{"apiVersion", "policy/v1beta1"},
                   {"kind", "Eviction"},
                   {"metadata", {{"name", first}, {"namespace", "sky-test"}}},
                   {"deleteOptions",
                    {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}, {"gracePeriodSeconds", 1}}}}
                  .dump());
        CHECK(call.get() == 8);
        const std::string second = pool.instances().at(0).id;
        CHECK(second != first);
        CHECK(preempted >= 1);
        CHECK(replaced >= 1);
    }
    check_nothing_left(c);
}

TEST_CASE(
    "kubernetes pool: an elastic pool starts with no pod, wakes one for its first call, grows "
    "to two with resize and shrinks back to one, deleting that pod",
    "[kubernetes][e2e][elastic]") {
    SKIP_WITHOUT_KUBERNETES();
    KubernetesCluster c(1);
    {
        auto spec = spec_of(c, 0);
        spec.autoscale = sky::Autoscale{.min = 0, .max = 2, .scaledown_window = 600s};
        sky::ComputePool pool{spec};
        INFO(c.logs());
        // Lazy: the ConfigMap that will own the pods, and no pod until the first call.
        CHECK(count_of(c, "pods") == 0);
        CHECK(count_of(c, "configmaps") == 1);
        CHECK((sky::compute<add>(2, 3) >> pool) == 5);
        CHECK(count_of(c, "pods") == 1);
        pool.resize(2).get();
        CHECK(count_of(c, "pods") == 2);
        CHECK(pool.instances().size() == 2);
        auto [x, y] = sky::gather(sky::compute<add>(1, 1), sky::compute<square>(7)) >> pool;
        CHECK(x == 2);
        CHECK(y == 49);
        pool.resize(1).get();
        const auto until = Clock::now() + 30s;
        while (Clock::now() < until && count_of(c, "pods") != 1) std::this_thread::sleep_for(500ms);
        CHECK(count_of(c, "pods") == 1);
        CHECK(pool.instances().size() == 1);
        CHECK((sky::compute<square>(4) >> pool) == 16);
    }
    check_nothing_left(c);
}

TEST_CASE("kubernetes pool: a user without pods/exec gets a BootstrapError naming pods/exec",
          "[kubernetes][e2e]") {
    SKIP_WITHOUT_KUBERNETES();
    KubernetesCluster c(1);
    // The namespaced Role without exec: pods, their status, events and ConfigMaps only.
    c.api("PUT", "/apis/rbac.authorization.k8s.io/v1/namespaces/sky-test/roles/sky-user",
          R"({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
              "metadata": {"name": "sky-user", "namespace": "sky-test"},
              "rules": [
                {"apiGroups": [""], "resources": ["pods", "pods/status", "pods/log"],
                 "verbs": ["get", "list", "watch", "create", "delete", "deletecollection", "patch"]},
                {"apiGroups": [""], "resources": ["pods/portforward"], "verbs": ["get", "create"]},
                {"apiGroups": [""], "resources": ["events"], "verbs": ["get", "list", "watch"]},
                {"apiGroups": [""], "resources": ["configmaps"],
                 "verbs": ["get", "list", "watch", "create", "delete", "patch"]}]})");
    std::string what;
    try {
        sky::ComputePool pool{spec_of(c, 1)};
        FAIL("the pool started without pods/exec");
    } catch (const sky::BootstrapError& e) {
        what = e.what();
        CHECK(e.phase() == "check");
    }
    INFO(what);
    CHECK(what.find("pods/exec") != std::string::npos);
    check_nothing_left(c);
}

TEST_CASE("kubernetes pool: SIGINT deletes the pods and the ConfigMap before the program ends",
          "[kubernetes][e2e]") {
    SKIP_WITHOUT_KUBERNETES();
    sky::test::TempSkyHome home;  // the ledgers of the driver and of `sky gc`
    KubernetesCluster c(1);
    Child driver({SKY_KUBERNETES_DRIVER, c.user_kubeconfig(), c.env("SKY_KUBE_BASE_IMAGE"), "2"});
    const auto ready = driver.line("ready ", 180s);
    INFO(driver.seen() << c.logs());
    REQUIRE(ready);
    CHECK(count_of(c, "pods") == 2);
    std::this_thread::sleep_for(1s);  // the long call runs
    REQUIRE(::kill(driver.pid(), SIGINT) == 0);
    const auto st = driver.wait(120s);
    REQUIRE(st);
    CHECK(WIFSIGNALED(*st));
    // The teardown confirmed them gone before the program died.
    CHECK(count_of(c, "pods") == 0);
    CHECK(count_of(c, "configmaps") == 0);
}

TEST_CASE("kubernetes pool: kill -9, then sky ls and sky gc with nothing but the ledger",
          "[kubernetes][e2e]") {
    SKIP_WITHOUT_KUBERNETES();
    sky::test::TempSkyHome home;  // the ledgers of the driver and of `sky gc`
    KubernetesCluster c(1);
    Child driver({SKY_KUBERNETES_DRIVER, c.user_kubeconfig(), c.env("SKY_KUBE_BASE_IMAGE"), "2"});
    const auto ready = driver.line("ready ", 180s);
    INFO(driver.seen() << c.logs());
    REQUIRE(ready);
    const std::string pool_id = ready->substr(6);
    REQUIRE(::kill(driver.pid(), SIGKILL) == 0);
    REQUIRE(driver.wait(30s));
    // The pods outlive their client until someone collects them.
    CHECK(count_of(c, "pods") == 2);
    // No default kubeconfig: KUBECONFIG unset and a HOME without ~/.kube. sky ls and sky gc
    // reach the dead pool through the kubeconfig files, context and namespace its ledger
    // recorded.
    const fs::path empty_home = home.dir() / "no-kube-home";
    fs::create_directories(empty_home);
    const auto cli = [&](std::vector<std::string> args) {
        std::vector<std::string> argv{"env", "-u", "KUBECONFIG", "HOME=" + empty_home.string(),
                                      SKY_CLI_PATH};
        argv.insert(argv.end(), args.begin(), args.end());
        return argv;
    };
    auto ls = sky::test::run_command(cli({"ls", "--provider", "kubernetes"}), 60s);
    INFO("sky ls: " << ls.output);
    CHECK(ls.status == 0);
    CHECK(ls.output.find(pool_id) != std::string::npos);
    CHECK(ls.output.find("sky-" + pool_id + "-n0-") != std::string::npos);
    // The recorded kubeconfig gone, and none in the environment: a clear refusal naming it,
    // and nothing deleted.
    const fs::path user = c.user_kubeconfig(), away = user.string() + ".away";
    fs::rename(user, away);
    auto refused = sky::test::run_command(cli({"gc"}), 120s);
    fs::rename(away, user);
    INFO("sky gc without any kubeconfig: " << refused.output);
    CHECK(refused.status == 1);
    CHECK(refused.output.find(user.string()) != std::string::npos);
    CHECK(refused.output.find("KUBECONFIG") != std::string::npos);
    CHECK(count_of(c, "pods") == 2);
    auto gc = sky::test::run_command(cli({"gc"}), 240s);
    INFO("sky gc: " << gc.output);
    CHECK(gc.status == 0);
    check_nothing_left(c);
    gc = sky::test::run_command(cli({"gc"}), 120s);
    CHECK(gc.status == 0);
}

TEST_CASE(
    "kubernetes pool: a user whose kubeconfig runs an exec plugin (client.authentication.k8s.io "
    "v1) runs the same pool as the certificate user, the plugin run once for the process",
    "[kubernetes][e2e]") {
    SKIP_WITHOUT_KUBERNETES();
    KubernetesCluster c(1);
    // The namespaced test user's certificate, handed over by a plugin instead of the file.
    const fs::path dir = c.dir() / "exec-user";
    fs::create_directories(dir);
    const fs::path runs = dir / "runs", kubeconfig = dir / "kubeconfig";
    {
        std::ofstream out(kubeconfig);
        out << "apiVersion: v1\nkind: Config\nclusters:\n- name: sky-test\n  cluster:\n"
            << "    server: " << c.env("SKY_KUBE_SERVER") << "\n"
            << "    certificate-authority: " << c.env("SKY_KUBE_CA") << "\n"
            << "users:\n- name: sky-user-exec\n  user:\n    exec:\n"
            << "      apiVersion: client.authentication.k8s.io/v1\n"
            << "      command: python3\n"
            << "      args: [" << SKY_KUBERNETES_EXEC_PLUGIN
            << ", client.authentication.k8s.io/v1, " << runs.string() << ", "
            << (c.dir() / "pki/user.crt").string() << ", " << (c.dir() / "pki/user.key").string()
            << "]\n"
            << "      interactiveMode: Never\n"
            << "contexts:\n- name: sky-test\n  context:\n    cluster: sky-test\n"
            << "    user: sky-user-exec\n    namespace: sky-test\ncurrent-context: sky-test\n";
    }
    {
        sky::PoolSpec s = spec_of(c, 2);
        s.provider = sky::Kubernetes{.kubeconfig = kubeconfig.string(),
                                     .image = c.env("SKY_KUBE_BASE_IMAGE"),
                                     .queue_timeout = std::chrono::seconds(60)};
        sky::ComputePool pool{s};
        CHECK(count_of(c, "pods") == 2);
        const std::vector<int> sums = sky::compute<add>(2, 3) | pool;
        CHECK(sums == std::vector<int>{5, 5});
        const std::vector<int> squares = sky::map<square>(std::vector<int>{1, 2, 3}) >> pool;
        CHECK(squares == std::vector<int>{1, 4, 9});
        const auto seen = sky::compute<where>() | pool;
        REQUIRE(seen.size() == 2);
        CHECK(seen[1].rfind("1 ", 0) == 0);
    }
    check_nothing_left(c);
    // REST, exec and port-forward share the credential: one run, cached (no expiry given).
    std::ifstream in(runs);
    int n = 0;
    for (std::string l; std::getline(in, l);) n += l == "run";
    CHECK(n == 1);
}

TEST_CASE(
    "kubernetes pool: a pod deleted with a grace period during a 2-pod call is a preemption "
    "notice on every rank with one checkpoint step, before InstancePreempted",
    "[kubernetes][e2e][preemption]") {
    SKIP_WITHOUT_KUBERNETES();
    KubernetesCluster c(1);
    std::mutex m;
    std::vector<std::string> order;
    std::vector<sky::PreemptionNotice> notices;
    std::string victim;
    std::vector<StepResult> results;
    std::chrono::system_clock::time_point deleted_at;
    {
        sky::PoolSpec s = spec_of(c, 2);
        s.on_event = [&](const sky::Event& e) -> std::optional<sky::Event> {
            std::lock_guard lk(m);
            if (const auto* n = std::get_if<sky::PreemptionNotice>(&e)) {
                notices.push_back(*n);
                order.push_back("notice " + n->instance_id);
            }
            if (const auto* p = std::get_if<sky::InstancePreempted>(&e))
                order.push_back("preempted " + p->instance_id);
            return std::nullopt;
        };
        sky::ComputePool pool{s};
        INFO(c.logs());
        victim = pool.instances().at(1).id;
        auto deleter = std::async(std::launch::async, [&] {
            std::this_thread::sleep_for(4s);  // both ranks run and report their steps
            deleted_at = std::chrono::system_clock::now();
            c.api("DELETE", "/api/v1/namespaces/sky-test/pods/" + victim,
                  json{{"apiVersion", "v1"}, {"kind", "DeleteOptions"}, {"gracePeriodSeconds", 20}}
                      .dump());
        });
        results = sky::compute<step_loop>(2500) | pool;
        deleter.get();
        // The reclaim comes at the grace period's end.
        const auto until = Clock::now() + 60s;
        auto preempted = [&] {
            std::lock_guard lk(m);
            return std::find(order.begin(), order.end(), "preempted " + victim) != order.end();
        };
        while (Clock::now() < until && !preempted()) std::this_thread::sleep_for(200ms);
        CHECK(preempted());
    }
    {
        std::lock_guard lk(m);
        REQUIRE(notices.size() == 1);
        const auto& n = notices[0];
        CHECK(n.node == 1);
        CHECK(n.instance_id == victim);
        CHECK(n.checkpoint_step >= 1);
        CHECK(n.reason.find("grace period of 20 s") != std::string::npos);
        // The deadline is the deletion's: the kubelet kills the pod 20 s after it.
        const auto ahead =
            std::chrono::duration_cast<std::chrono::seconds>(n.deadline - deleted_at);
        CHECK(ahead >= 17s);
        CHECK(ahead <= 23s);
        REQUIRE(order.size() >= 2);
        CHECK(order[0] == "notice " + victim);
        CHECK(order[1] == "preempted " + victim);
        REQUIRE(results.size() == 2);
        for (const auto& r : results) {
            INFO("rank " << r.node);
            CHECK(r.instance_id == victim);
            CHECK(r.checkpoint_step == n.checkpoint_step);
            CHECK(r.saved == n.checkpoint_step);  // every rank saved the same step
            CHECK(r.seen_at_step <= r.saved);
        }
    }
    check_nothing_left(c);
}
