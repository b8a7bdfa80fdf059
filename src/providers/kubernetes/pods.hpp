#pragma once
// What sky puts in a cluster and how it reads it back (api.md §5c), as pure functions: the pool's
// names and labels, the one ConfigMap that owns its pods, a node's pod (restartPolicy Never, no
// service-account token, activeDeadlineSeconds, /dev/shm, the accelerator as limits with its
// toleration and product-label affinity, the user's selector, tolerations, labels and
// annotations), the checks of the user's fields, and a pod's status as sky acts on it.
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sky/accelerator.hpp"

namespace sky::detail::kubernetes {

inline constexpr const char* kManagedBy = "app.kubernetes.io/managed-by";
inline constexpr const char* kPoolLabel = "sky.io/pool";
inline constexpr const char* kNodeLabel = "sky.io/node";
/// The container every pod of sky's has.
inline constexpr const char* kContainer = "sky";
/// The default base image (a CUDA 12 runtime one with a GPU).
inline constexpr const char* kDefaultImage = "ubuntu:24.04";
inline constexpr const char* kDefaultGpuImage = "nvidia/cuda:12.6.3-runtime-ubuntu24.04";

/// A pod's terminationGracePeriodSeconds: how long a deletion that names no grace period of its
/// own (an eviction, a drain, the garbage collector) leaves the worker running after the pool's
/// preemption notice, for the ranks to save their step (api.md §10a).
inline constexpr int kTerminationGrace = 60;

/// "sky-<pool id>": the ConfigMap's name.
[[nodiscard]] std::string owner_name(const std::string& pool_id);
/// "sky-<pool id>-n<i>-<4 hex>".
[[nodiscard]] std::string pod_name(const std::string& pool_id, int node, const std::string& hex4);
/// The labelSelector value of a pool's objects (every sky pool's when pool_id is empty).
[[nodiscard]] std::string pool_selector(const std::string& pool_id);

/// A toleration as `kubectl taint` writes it: `key[=value]:Effect`.
struct Toleration {
    std::string key, value, effect;
};
/// Throws ConfigError naming the entry when it is not `key[=value]:Effect` with Effect one of
/// NoSchedule, PreferNoSchedule, NoExecute.
[[nodiscard]] Toleration parse_toleration(const std::string& text);

/// The problems of a label or annotation map (key syntax: [prefix/]name; label values at most 63
/// characters of [A-Za-z0-9._-]); `what` names the field.
void check_metadata(const std::map<std::string, std::string>& m, bool values_are_labels,
                    const std::string& what, std::vector<std::string>& problems);

/// The accelerator as a container limit: "nvidia.com/gpu", "amd.com/gpu" or
/// "nvidia.com/mig-<profile>", and the count; none for a CPU pool.
struct GpuLimit {
    std::string resource;
    int count = 0;
    std::string toleration_key;  ///< the taint GPU nodes carry: nvidia.com/gpu or amd.com/gpu
};
[[nodiscard]] std::optional<GpuLimit> gpu_limit(const std::optional<Accelerator>& accelerator);

/// The node label keys that name a GPU product, in order of preference.
[[nodiscard]] const std::vector<std::string>& product_label_keys();
/// A required node affinity for `accelerator` from the nodes' labels: the first product key any
/// node carries, with the values that contain the accelerator's name (any case). Null when no
/// node carries one.
[[nodiscard]] nlohmann::json product_affinity(const nlohmann::json& node_list,
                                              const std::string& accelerator_name);

/// Everything a node's pod is made of.
struct PodPlan {
    std::string pool_id;
    int node = 0;
    std::string name;
    std::string image;
    std::map<std::string, std::string> node_selector, labels, annotations;
    std::vector<Toleration> tolerations;
    std::optional<GpuLimit> gpu;
    nlohmann::json affinity;  ///< null: none
    std::optional<int> cpu;
    std::optional<std::string> memory;  ///< as PoolSpec writes it ("16GB")
    std::chrono::seconds active_deadline{4200};
    std::string owner_uid;             ///< the ConfigMap's uid
    std::vector<std::string> command;  ///< the container's main process
    std::map<std::string, std::string> env;
};

/// The ConfigMap that owns a pool's pods.
[[nodiscard]] nlohmann::json owner_manifest(const std::string& pool_id);
/// A node's pod.
[[nodiscard]] nlohmann::json pod_manifest(const PodPlan& plan);
/// "16GB", "512MB", "1.5TB" as a Kubernetes quantity ("16Gi").
[[nodiscard]] std::string memory_quantity(const std::string& memory);

/// A pod's status as sky acts on it.
struct PodView {
    std::string name, uid, phase;  ///< phase: Pending, Running, Succeeded, Failed, Unknown
    std::string ip, node_name;
    std::string pool_id;
    int node = -1;
    std::string created;                          ///< metadata.creationTimestamp
    bool deleting = false;                        ///< a deletionTimestamp is set
    std::string deletion_time;                    ///< metadata.deletionTimestamp: when it is killed
    long grace_seconds = -1;                      ///< metadata.deletionGracePeriodSeconds
    std::string unschedulable;                    ///< PodScheduled=False's message
    std::string waiting_reason, waiting_message;  ///< the container's waiting state
    std::optional<std::string> disruption;        ///< DisruptionTarget=True: "<reason>: <message>"
    bool terminated = false;                      ///< the container ended
    std::string terminated_reason;                ///< OOMKilled, Error, Completed...
    int exit_code = 0;
    std::string reason, message;  ///< status.reason/message (Evicted, DeadlineExceeded)
    [[nodiscard]] bool running() const { return phase == "Running" && !deleting && !terminated; }
};
[[nodiscard]] PodView view_pod(const nlohmann::json& pod);

}  // namespace sky::detail::kubernetes
