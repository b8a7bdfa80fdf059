#include "providers/kubernetes/pods.hpp"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <regex>

#include "sky/errors.hpp"
#include "util/encoding.hpp"
#include "util/text.hpp"

namespace sky::detail::kubernetes {

using nlohmann::json;

std::string owner_name(const std::string& pool_id) { return "sky-" + pool_id; }

std::string pod_name(const std::string& pool_id, int node, const std::string& hex4) {
    return fmt::format("sky-{}-n{}-{}", pool_id, node, hex4);
}

std::string pool_selector(const std::string& pool_id) {
    std::string s = std::string(kManagedBy) + "=sky";
    if (!pool_id.empty()) s += std::string(",") + kPoolLabel + "=" + pool_id;
    return url_encode(s);
}

Toleration parse_toleration(const std::string& text) {
    static const std::regex re(R"(^([A-Za-z0-9][-A-Za-z0-9_./]*)(=([-A-Za-z0-9_.]*))?:(\w+)$)");
    std::smatch m;
    if (!std::regex_match(text, m, re))
        throw ConfigError(fmt::format(
            "sky::Kubernetes tolerations: \"{}\" is not key[=value]:Effect (as kubectl taint "
            "writes it, e.g. \"nvidia.com/gpu:NoSchedule\")",
            text));
    Toleration t{m[1], m[3], m[4]};
    if (t.effect != "NoSchedule" && t.effect != "PreferNoSchedule" && t.effect != "NoExecute")
        throw ConfigError(
            fmt::format("sky::Kubernetes tolerations: \"{}\": the effect must be NoSchedule, "
                        "PreferNoSchedule or NoExecute",
                        text));
    return t;
}

namespace {

bool name_part(const std::string& s, std::size_t max) {
    static const std::regex re(R"(^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$)");
    return !s.empty() && s.size() <= max && std::regex_match(s, re);
}

bool dns_subdomain(const std::string& s) {
    static const std::regex re(
        R"(^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$)");
    return !s.empty() && s.size() <= 253 && std::regex_match(s, re);
}

}  // namespace

void check_metadata(const std::map<std::string, std::string>& m, bool values_are_labels,
                    const std::string& what, std::vector<std::string>& problems) {
    for (const auto& [k, v] : m) {
        const auto slash = k.find('/');
        const std::string prefix = slash == std::string::npos ? "" : k.substr(0, slash);
        const std::string name = slash == std::string::npos ? k : k.substr(slash + 1);
        if ((slash != std::string::npos && !dns_subdomain(prefix)) || !name_part(name, 63))
            problems.push_back(fmt::format(
                "provider: sky::Kubernetes {}: \"{}\" is not a key ([prefix/]name: a DNS "
                "subdomain, then at most 63 of A-Z a-z 0-9 - _ . starting and ending with a "
                "letter or digit)",
                what, k));
        if (prefix == "sky.io" || k == kManagedBy)
            problems.push_back(
                fmt::format("provider: sky::Kubernetes {}: \"{}\" is sky's own", what, k));
        if (values_are_labels && !v.empty() && !name_part(v, 63))
            problems.push_back(fmt::format(
                "provider: sky::Kubernetes {}: the value of \"{}\" is not a label value (at most "
                "63 of A-Z a-z 0-9 - _ . starting and ending with a letter or digit)",
                what, k));
    }
}

std::optional<GpuLimit> gpu_limit(const std::optional<Accelerator>& a) {
    if (!a || a->name.empty()) return std::nullopt;
    GpuLimit g;
    g.count = std::max(1, a->count);
    if (iequals(a->manufacturer, "AMD")) {
        g.resource = "amd.com/gpu";
        g.toleration_key = "amd.com/gpu";
    } else if (a->mig) {
        g.resource = "nvidia.com/mig-" + *a->mig;
        g.toleration_key = "nvidia.com/gpu";
    } else {
        g.resource = "nvidia.com/gpu";
        g.toleration_key = "nvidia.com/gpu";
    }
    return g;
}

const std::vector<std::string>& product_label_keys() {
    static const std::vector<std::string> keys{
        "skypilot.co/accelerator", "cloud.google.com/gke-accelerator",
        "karpenter.k8s.aws/instance-gpu-name", "nvidia.com/gpu.product", "gpu.nvidia.com/class"};
    return keys;
}

json product_affinity(const json& node_list, const std::string& accelerator_name) {
    const std::string want = to_lower(accelerator_name);
    for (const auto& key : product_label_keys()) {
        std::vector<std::string> values;
        bool any = false;
        for (const auto& n : node_list.value("items", json::array())) {
            const auto& labels = n["metadata"].value("labels", json::object());
            if (!labels.contains(key) || !labels[key].is_string()) continue;
            any = true;
            const std::string v = labels[key].get<std::string>();
            if (to_lower(v).find(want) != std::string::npos &&
                std::find(values.begin(), values.end(), v) == values.end())
                values.push_back(v);
        }
        if (!any) continue;
        // Nodes carry this key: only the matching products (none matching: nothing schedules,
        // and the scheduler says so).
        if (values.empty()) values.push_back("sky-no-node-has-" + want);
        json expression = {{"key", key}, {"operator", "In"}, {"values", values}};
        json term = {{"matchExpressions", json::array({expression})}};
        json required = {{"nodeSelectorTerms", json::array({term})}};
        return json{
            {"nodeAffinity", {{"requiredDuringSchedulingIgnoredDuringExecution", required}}}};
    }
    return nullptr;
}

std::string memory_quantity(const std::string& memory) {
    static const std::regex re(R"(^\s*([0-9]+(\.[0-9]+)?)\s*([KMGT]i?B?|[kmgt]i?b?)?\s*$)");
    std::smatch m;
    if (!std::regex_match(memory, m, re))
        throw ConfigError(fmt::format("memory: \"{}\" is not a size like \"16GB\"", memory));
    const double v = std::stod(m[1]);
    const std::string unit = m[3].matched ? to_upper(std::string(m[3]).substr(0, 1)) : "G";
    const double mi = v * (unit == "K"   ? 1.0 / 1024
                           : unit == "M" ? 1
                           : unit == "G" ? 1024
                                         : 1048576);
    return fmt::format("{}Mi", static_cast<long long>(std::ceil(mi)));
}

json owner_manifest(const std::string& pool_id) {
    return json{
        {"apiVersion", "v1"},
        {"kind", "ConfigMap"},
        {"metadata",
         {{"name", owner_name(pool_id)}, {"labels", {{kManagedBy, "sky"}, {kPoolLabel, pool_id}}}}},
        {"data", {{"pool", pool_id}}}};
}

json pod_manifest(const PodPlan& p) {
    json labels = json::object();
    for (const auto& [k, v] : p.labels) labels[k] = v;
    labels[kManagedBy] = "sky";
    labels[kPoolLabel] = p.pool_id;
    labels[kNodeLabel] = std::to_string(p.node);
    json annotations = json::object();
    for (const auto& [k, v] : p.annotations) annotations[k] = v;

    json requests = json::object(), limits = json::object();
    if (p.cpu) requests["cpu"] = std::to_string(*p.cpu);
    if (p.memory) requests["memory"] = memory_quantity(*p.memory);
    if (p.gpu) limits[p.gpu->resource] = std::to_string(p.gpu->count);
    json resources = json::object();
    if (!requests.empty()) resources["requests"] = requests;
    if (!limits.empty()) resources["limits"] = limits;

    json env = json::array();
    for (const auto& [k, v] : p.env) env.push_back({{"name", k}, {"value", v}});

    json container = {
        {"name", kContainer},
        {"image", p.image},
        {"imagePullPolicy", "IfNotPresent"},
        {"command", p.command},
        {"resources", resources},
        {"volumeMounts", json::array({{{"name", "dshm"}, {"mountPath", "/dev/shm"}}})}};
    if (!env.empty()) container["env"] = env;

    json tolerations = json::array();
    for (const auto& t : p.tolerations) {
        json j = {{"key", t.key}, {"effect", t.effect}};
        if (t.value.empty()) {
            j["operator"] = "Exists";
        } else {
            j["operator"] = "Equal";
            j["value"] = t.value;
        }
        tolerations.push_back(j);
    }
    if (p.gpu) tolerations.push_back({{"key", p.gpu->toleration_key}, {"operator", "Exists"}});

    json spec = {
        {"restartPolicy", "Never"},
        {"automountServiceAccountToken", false},
        {"enableServiceLinks", false},
        {"activeDeadlineSeconds", p.active_deadline.count()},
        {"terminationGracePeriodSeconds", kTerminationGrace},
        {"containers", json::array({container})},
        {"volumes", json::array({{{"name", "dshm"}, {"emptyDir", {{"medium", "Memory"}}}}})}};
    if (!tolerations.empty()) spec["tolerations"] = tolerations;
    if (!p.node_selector.empty()) {
        json sel = json::object();
        for (const auto& [k, v] : p.node_selector) sel[k] = v;
        spec["nodeSelector"] = sel;
    }
    if (!p.affinity.is_null()) spec["affinity"] = p.affinity;

    json meta = {{"name", p.name}, {"labels", labels}};
    if (!annotations.empty()) meta["annotations"] = annotations;
    if (!p.owner_uid.empty())
        meta["ownerReferences"] = json::array({{{"apiVersion", "v1"},
                                                {"kind", "ConfigMap"},
                                                {"name", owner_name(p.pool_id)},
                                                {"uid", p.owner_uid}}});
    return json{{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", meta}, {"spec", spec}};
}

PodView view_pod(const json& pod) {
    PodView v;
    const json& meta = pod.value("metadata", json::object());
    const json& status = pod.value("status", json::object());
    v.name = meta.value("name", "");
    v.uid = meta.value("uid", "");
    v.created = meta.value("creationTimestamp", "");
    v.deleting = meta.contains("deletionTimestamp") && !meta["deletionTimestamp"].is_null();
    if (v.deleting && meta["deletionTimestamp"].is_string())
        v.deletion_time = meta["deletionTimestamp"].get<std::string>();
    if (meta.contains("deletionGracePeriodSeconds") &&
        meta["deletionGracePeriodSeconds"].is_number())
        v.grace_seconds = meta["deletionGracePeriodSeconds"].get<long>();
    const json& labels = meta.value("labels", json::object());
    v.pool_id = labels.value(kPoolLabel, "");
    try {
        v.node = std::stoi(labels.value(kNodeLabel, "-1"));
    } catch (...) {
    }
    v.phase = status.value("phase", "");
    v.ip = status.value("podIP", "");
    v.node_name = pod.value("spec", json::object()).value("nodeName", "");
    v.reason = status.value("reason", "");
    v.message = status.value("message", "");
    for (const auto& c : status.value("conditions", json::array())) {
        const std::string type = c.value("type", ""), st = c.value("status", "");
        if (type == "PodScheduled" && st == "False")
            v.unschedulable = c.value("message", c.value("reason", "Unschedulable"));
        if (type == "DisruptionTarget" && st == "True")
            v.disruption = fmt::format("{}: {}", c.value("reason", ""), c.value("message", ""));
    }
    for (const auto& c : status.value("containerStatuses", json::array())) {
        if (c.value("name", "") != kContainer) continue;
        const json& state = c.value("state", json::object());
        if (state.contains("waiting")) {
            v.waiting_reason = state["waiting"].value("reason", "");
            v.waiting_message = state["waiting"].value("message", "");
        }
        if (state.contains("terminated")) {
            v.terminated = true;
            v.terminated_reason = state["terminated"].value("reason", "");
            v.exit_code = state["terminated"].value("exitCode", 0);
        }
    }
    return v;
}

}  // namespace sky::detail::kubernetes
