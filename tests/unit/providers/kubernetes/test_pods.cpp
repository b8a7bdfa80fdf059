// What sky::Kubernetes puts in a cluster and how it reads it back (api.md §5c), as the pure
// functions of providers/kubernetes/pods.hpp and the ledger's pool reference.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "providers/kubernetes/inventory.hpp"
#include "providers/kubernetes/pods.hpp"
#include "sky/errors.hpp"

using namespace sky::detail::kubernetes;
using nlohmann::json;

TEST_CASE("kubernetes pods: names and labels of a pool's objects", "[kubernetes]") {
    const std::string pool = "0123456789abcdef";
    CHECK(owner_name(pool) == "sky-0123456789abcdef");
    CHECK(pod_name(pool, 3, "a1b2") == "sky-0123456789abcdef-n3-a1b2");
    CHECK(pool_selector(pool) ==
          "app.kubernetes.io%2Fmanaged-by%3Dsky%2Csky.io%2Fpool%3D0123456789abcdef");
    CHECK(pool_selector("") == "app.kubernetes.io%2Fmanaged-by%3Dsky");
    const json cm = owner_manifest(pool);
    CHECK(cm["kind"] == "ConfigMap");
    CHECK(cm["metadata"]["name"] == "sky-0123456789abcdef");
    CHECK(cm["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "sky");
    CHECK(cm["metadata"]["labels"]["sky.io/pool"] == pool);
}

TEST_CASE(
    "kubernetes pods: a GPU pod has limits, the GPU toleration, the product affinity, no "
    "service-account token, a deadline, /dev/shm and its owner",
    "[kubernetes]") {
    PodPlan p;
    p.pool_id = "0123456789abcdef";
    p.node = 1;
    p.name = pod_name(p.pool_id, 1, "beef");
    p.image = "img:1";
    p.labels = {{"kueue.x-k8s.io/queue-name", "team-a"}};
    p.annotations = {{"cost-centre", "ml 42"}};
    p.node_selector = {{"pool", "gpu"}};
    p.tolerations = {parse_toleration("dedicated=ml:NoSchedule")};
    p.gpu = gpu_limit(sky::Accelerator::parse("H100:8"));
    const json nodes = json::parse(R"({"items": [
        {"metadata": {"labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}},
        {"metadata": {"labels": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}}},
        {"metadata": {"labels": {}}}]})");
    p.affinity = product_affinity(nodes, "H100");
    p.cpu = 4;
    p.memory = "16GB";
    p.active_deadline = std::chrono::seconds(7800);
    p.owner_uid = "uid-1";
    p.command = {"bash", "-c", "true"};
    const json pod = pod_manifest(p);
    const json& spec = pod["spec"];
    const json& c = spec["containers"][0];
    CHECK(pod["metadata"]["labels"]["sky.io/node"] == "1");
    CHECK(pod["metadata"]["labels"]["sky.io/pool"] == p.pool_id);
    CHECK(pod["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a");
    CHECK(pod["metadata"]["annotations"]["cost-centre"] == "ml 42");
    CHECK(pod["metadata"]["ownerReferences"][0]["kind"] == "ConfigMap");
    CHECK(pod["metadata"]["ownerReferences"][0]["uid"] == "uid-1");
    CHECK(spec["restartPolicy"] == "Never");
    CHECK(spec["automountServiceAccountToken"] == false);
    CHECK(spec["activeDeadlineSeconds"] == 7800);
    CHECK(spec["terminationGracePeriodSeconds"] == 60);
    CHECK(spec["nodeSelector"]["pool"] == "gpu");
    CHECK(c["imagePullPolicy"] == "IfNotPresent");
    CHECK(c["resources"]["limits"]["nvidia.com/gpu"] == "8");
    CHECK(c["resources"]["requests"]["cpu"] == "4");
    CHECK(c["resources"]["requests"]["memory"] == "16384Mi");
    CHECK(c["volumeMounts"][0]["mountPath"] == "/dev/shm");
    CHECK(spec["volumes"][0]["emptyDir"]["medium"] == "Memory");
    REQUIRE(spec["tolerations"].size() == 2);
    CHECK(spec["tolerations"][0] == json{{"key", "dedicated"},
                                         {"operator", "Equal"},
                                         {"value", "ml"},
                                         {"effect", "NoSchedule"}});
    CHECK(spec["tolerations"][1] == json{{"key", "nvidia.com/gpu"}, {"operator", "Exists"}});
    const json& expr =
        spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            ["nodeSelectorTerms"][0]["matchExpressions"][0];
    CHECK(expr["key"] == "nvidia.com/gpu.product");
    CHECK(expr["values"] == json::array({"NVIDIA-H100-80GB-HBM3"}));
}

TEST_CASE("kubernetes pods: accelerators as limits, and no affinity where no node has a label",
          "[kubernetes]") {
    CHECK_FALSE(gpu_limit(std::nullopt));
    const auto mig = gpu_limit(sky::Accelerator::parse("H100@3g.40gb"));
    REQUIRE(mig);
    CHECK(mig->resource == "nvidia.com/mig-3g.40gb");
    CHECK(mig->toleration_key == "nvidia.com/gpu");
    CHECK(product_affinity(json::parse(R"({"items": [{"metadata": {"labels": {}}}]})"), "H100")
              .is_null());
    // Nodes label their products but none matches: nothing schedules, and the scheduler says so.
    const json none = product_affinity(
        json::parse(R"({"items": [{"metadata": {"labels": {"cloud.google.com/gke-accelerator":
                        "nvidia-tesla-t4"}}}]})"),
        "H100");
    CHECK(none.dump().find("cloud.google.com/gke-accelerator") != std::string::npos);
    CHECK(none.dump().find("nvidia-tesla-t4") == std::string::npos);
}

TEST_CASE("kubernetes pods: the user's fields are checked with messages naming them",
          "[kubernetes]") {
    CHECK(parse_toleration("nvidia.com/gpu:NoSchedule").value.empty());
    CHECK(parse_toleration("k=v:NoExecute").value == "v");
    CHECK_THROWS_AS(parse_toleration("nvidia.com/gpu"), sky::ConfigError);
    CHECK_THROWS_WITH(parse_toleration("k:Sometimes"), Catch::Contains("NoSchedule"));
    std::vector<std::string> problems;
    check_metadata(
        {{"ok/name", "v"}, {"Bad Key", "v"}, {"k", "not a value!"}, {"sky.io/pool", "x"}}, true,
        "labels", problems);
    REQUIRE(problems.size() == 3);
    CHECK(problems[0].find("\"Bad Key\"") != std::string::npos);
    CHECK(problems[1].find("value of \"k\"") != std::string::npos);
    CHECK(problems[2].find("sky's own") != std::string::npos);
    problems.clear();
    check_metadata({{"note", "any text at all!"}}, false, "annotations", problems);
    CHECK(problems.empty());
    CHECK(memory_quantity("512MB") == "512Mi");
    CHECK(memory_quantity("1.5GB") == "1536Mi");
    CHECK_THROWS_AS(memory_quantity("lots"), sky::ConfigError);
}

TEST_CASE("kubernetes pods: a pod's status as sky reads it", "[kubernetes]") {
    const PodView pending = view_pod(json::parse(R"({
        "metadata": {"name": "p", "labels": {"sky.io/pool": "abc", "sky.io/node": "2"}},
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
            "reason": "Unschedulable",
            "message": "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."}]}})"));
    CHECK(pending.node == 2);
    CHECK(pending.pool_id == "abc");
    CHECK(pending.unschedulable == "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.");
    CHECK_FALSE(pending.running());
    const PodView oom = view_pod(json::parse(R"({"metadata": {"name": "p"},
        "spec": {"nodeName": "node0"},
        "status": {"phase": "Failed", "podIP": "10.1.0.5", "containerStatuses": [{"name": "sky",
            "state": {"terminated": {"reason": "OOMKilled", "exitCode": 137}}}]}})"));
    CHECK(oom.terminated);
    CHECK(oom.terminated_reason == "OOMKilled");
    CHECK(oom.exit_code == 137);
    CHECK(oom.node_name == "node0");
    const PodView evicted = view_pod(json::parse(R"({"metadata": {"name": "p",
        "deletionTimestamp": "2026-12-02T01:00:00Z", "deletionGracePeriodSeconds": 60},
        "status": {"phase": "Running", "conditions": [{"type": "DisruptionTarget",
            "status": "True", "reason": "EvictionByEvictionAPI", "message": "Eviction API"}]}})"));
    CHECK(evicted.deleting);
    CHECK(evicted.grace_seconds == 60);
    REQUIRE(evicted.disruption);
    CHECK(*evicted.disruption == "EvictionByEvictionAPI: Eviction API");
    CHECK_FALSE(evicted.running());
}

TEST_CASE("kubernetes inventory: the ledger's pool reference round-trips, credentials never in it",
          "[kubernetes]") {
    const PoolRef r{"0123456789abcdef", "ml-team", "gpu:prod", "/home/a b/.kube/config"};
    const std::string text = r.to_string();
    CHECK(text.rfind("kubernetes:0123456789abcdef:ml-team:gpu%3Aprod:", 0) == 0);
    const auto back = PoolRef::parse(text);
    REQUIRE(back);
    CHECK(back->pool_id == r.pool_id);
    CHECK(back->ns == r.ns);
    CHECK(back->context == r.context);
    CHECK(back->kubeconfig == r.kubeconfig);
    CHECK_FALSE(PoolRef::parse("sky-0123-n0-abcd"));
    CHECK_FALSE(PoolRef::parse("kubernetes:only"));
    // The files a pool merged (KUBECONFIG's list), in order; none in-cluster.
    const PoolRef merged{"0123456789abcdef", "ml-team", "c", "/a/one:/b/two"};
    const auto back2 = PoolRef::parse(merged.to_string());
    REQUIRE(back2);
    CHECK(back2->files() == std::vector<std::filesystem::path>{"/a/one", "/b/two"});
    CHECK(PoolRef{"0123456789abcdef", "ns", "", ""}.files().empty());
}

TEST_CASE("kubernetes pods: a deletion's time and grace period are read from the pod",
          "[kubernetes]") {
    const auto v = view_pod(nlohmann::json::parse(R"({"metadata": {"name": "p",
        "deletionTimestamp": "2026-12-02T06:30:20Z", "deletionGracePeriodSeconds": 20},
        "status": {"phase": "Running"}})"));
    CHECK(v.deleting);
    CHECK(v.deletion_time == "2026-12-02T06:30:20Z");
    CHECK(v.grace_seconds == 20);
    CHECK_FALSE(v.running());
    const auto pod = pod_manifest(PodPlan{.pool_id = "0123456789abcdef", .name = "p"});
    CHECK(pod["spec"]["terminationGracePeriodSeconds"] == kTerminationGrace);
}
