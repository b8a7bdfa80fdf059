// sky::Kubernetes (api.md §5c): a pool's nodes are pods, owned by one ConfigMap of the pool's,
// reached only through the API server. A pod's main process (scripts/pod_main.sh) holds it; the
// program is shipped into it through exec (a pod is a node shell: pod_shell.hpp), the image's
// bootstrap runs there, and the worker starts detached (scripts/worker.sh) on 127.0.0.1, where
// the client reaches it through a port-forward and sky's authenticated handshake. The cluster's
// signals come from a watch of the pool's pods by label (a list where a watch fails):
// scheduling messages while a pod waits, evictions and deletions by others, a container that
// ended. Leaving the pool deletes the ConfigMap (its pods follow) and the pods by label, lists
// until they are gone and force-deletes stragglers.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "ledger/ledger.hpp"
#include "pool/backend.hpp"
#include "providers/cloud/collect.hpp"
#include "providers/kubernetes/api.hpp"
#include "providers/kubernetes/inventory.hpp"
#include "providers/kubernetes/pod_shell.hpp"
#include "providers/kubernetes/pods.hpp"
#include "providers/kubernetes/provider.hpp"
#include "providers/kubernetes/scripts.hpp"
#include "providers/kubernetes/streaming.hpp"
#include "providers/remote/bring_up.hpp"
#include "ship/closure.hpp"
#include "ship/shipment.hpp"
#include "util/env.hpp"
#include "util/random.hpp"
#include "util/shell.hpp"
#include "util/text.hpp"

namespace sky::detail {

namespace {

using namespace kubernetes;
using Clock = std::chrono::steady_clock;
using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr auto kCommandLimit = seconds(60);
constexpr std::size_t kTailLines = 20;
// Teardown: the pods' grace period, how long they are listed until gone, how long stragglers
// force-deleted then get.
constexpr int kDeleteGrace = 5;
constexpr auto kGoneLimit = seconds(60);
constexpr auto kForcedLimit = seconds(20);
// How long a pod's main process waits for the first worker before it ends the pod.
constexpr auto kFirstWorkerWait = seconds(1800);

// One pool node's pod.
struct Pod {
    std::string name, uid, ip, node_name;
    Clock::time_point created{};
    std::shared_ptr<PodShell> shell;
    std::unique_ptr<NodeBringUp> bring;  // over `shell`
    bool announced = false;
    bool lost = false;  // gone, deleted, ended: a new pod takes its place
};

// What the pool's watch saw happen to a pod that sky did not delete.
struct Seen {
    bool deleting = false;
    long grace = -1;
    std::optional<std::string> disruption;
    std::string evicted;  // status.reason Evicted: its message
};

std::string with_message(const std::string& head, const std::string& message) {
    return message.empty() ? head : head + ": " + message;
}

bool image_failure(const std::string& reason) {
    return reason == "ErrImagePull" || reason == "ImagePullBackOff" ||
           reason == "InvalidImageName" || reason == "ErrImageNeverPull" ||
           reason == "CreateContainerConfigError" || reason == "CreateContainerError";
}

class KubernetesBackend final : public Backend {
public:
    KubernetesBackend(const PoolSpec& spec, std::string pool_id, Ledger* ledger)
        : spec_(spec),
          cfg_(*spec.provider.get<Kubernetes>()),
          pool_id_(std::move(pool_id)),
          ledger_(ledger) {
        state_dir_ = "/tmp/sky-pod-" + pool_id_;
    }
    ~KubernetesBackend() override { stop_all(); }

    void provision(int count, const std::function<void(Event)>& emit) override {
        {
            std::lock_guard lk(emit_m_);
            emit_ = emit;
        }
        KubeconfigRequest req;
        req.kubeconfig = cfg_.kubeconfig;
        req.context = cfg_.context;
        req.ns = cfg_.ns;
        api_ = connect_api(req);  // ConfigError: no kubeconfig, unknown context, ...
        ns_ = api_->target().ns;
        region_ = fmt::format(
            "{}/{}", api_->target().context.empty() ? "in-cluster" : api_->target().context, ns_);
        emit(InfraCreating{});
        // In the ledger before anything exists in the cluster: where to find the pool's objects
        // (never a credential), so that `sky gc` deletes them even when this client dies now.
        std::vector<std::string> files;
        for (const auto& f : api_->target().files)
            files.push_back(std::filesystem::absolute(f).string());
        PoolRef ref{pool_id_, ns_, api_->target().context, join(files, ":")};
        ref_ = ref.to_string();
        if (ledger_) {
            ledger_->region(region_);
            ledger_->instance(ref_);
        }
        created_ = true;
        json owner;
        try {
            owner = api_->call("POST", api_->core("configmaps"), owner_manifest(pool_id_));
        } catch (const ApiError& e) {
            if (e.status() >= 400 && e.status() < 500) created_ = false;  // nothing was made
            refused("create the pool's ConfigMap " + owner_name(pool_id_), e);
        }
        owner_uid_ = owner["metadata"].value("uid", "");
        emit(InfraCreated{region_});

        gpu_ = gpu_limit(spec_.accelerator);
        if (gpu_) {
            // Where the user may list nodes: a required affinity on their GPU product label.
            try {
                affinity_ =
                    product_affinity(api_->call("GET", "/api/v1/nodes"), spec_.accelerator->name);
            } catch (const ApiError&) {
                affinity_ = nullptr;  // only .node_selector then
            }
        }
        emit(InstanceLaunching{
            count, gpu_ ? fmt::format("{}: {}", gpu_->resource, gpu_->count) : std::string("pod"),
            "kubernetes"});
        std::vector<int> all;
        for (int i = 0; i < count; ++i) {
            create_pod(i);
            all.push_back(i);
        }
        wait_running(all, emit);
        monitor_ = std::thread([this] { monitor(); });
    }

    // An elastic pool's new nodes: one pod each, like provision()'s, and the same wait.
    void add(const std::vector<int>& nodes, const std::function<void(Event)>& emit) override {
        if (stopping_) throw ProvisionError("kubernetes: the pool is closing; no new pod");
        if (nodes.empty()) return;
        emit(InstanceLaunching{
            static_cast<int>(nodes.size()),
            gpu_ ? fmt::format("{}: {}", gpu_->resource, gpu_->count) : std::string("pod"),
            "kubernetes"});
        for (int i : nodes) create_pod(i);
        wait_running(nodes, emit);
    }

    // Ends node i's pod for good: deleted with a short grace period and looked up until the
    // API says it is gone (bounded), else force-deleted; then forgotten, so that its index can
    // be added again.
    void release(int i) override {
        std::string name;
        std::unique_ptr<NodeBringUp> bring;
        {
            std::lock_guard lk(m_);
            auto it = pods_.find(i);
            if (it == pods_.end()) return;
            name = it->second.name;
            bring = std::move(it->second.bring);
            ours_.insert(name);
        }
        bring.reset();
        if (shipment_) shipment_->forget(i);
        delete_pod(name, 5);
        const auto until = Clock::now() + seconds(60);
        bool gone = false;
        while (!gone && Clock::now() < until) {
            try {
                gone = !api_->get_if(api_->core("pods/" + name));
            } catch (const std::exception&) {
            }
            if (!gone) std::this_thread::sleep_for(milliseconds(500));
        }
        if (!gone) {
            emit_now(
                ErrorEvent{fmt::format("kubernetes: pod {}/{} was not gone 60 s after its "
                                       "deletion: deleted at once (grace period 0)",
                                       ns_, name)});
            delete_pod(name, 0);
        }
        std::lock_guard lk(m_);
        pods_.erase(i);
    }

    [[nodiscard]] double node_price() const override { return cfg_.hourly_price; }

    std::string head_address() const override {
        std::lock_guard lk(m_);
        auto it = pods_.find(0);
        return it == pods_.end() || it->second.ip.empty() ? std::string("127.0.0.1")
                                                          : it->second.ip;
    }

    NodeStart connect(int i, const std::function<void(Event)>& emit) override {
        Pod* p = nullptr;
        bool lost = false;
        {
            std::lock_guard lk(m_);
            p = &pods_.at(i);
            lost = p->lost;
        }
        if (lost) replace(i, emit);
        if (!p->shell) {
            try {
                auto shell = std::make_shared<PodShell>(api_, ns_, p->name);
                std::lock_guard lk(m_);
                p->shell = std::move(shell);
            } catch (const StreamRefused& e) {
                if (e.status() == 403)
                    throw BootstrapError(
                        i, p->name, "check",
                        fmt::format("kubernetes: the user may not use pods/exec in namespace {} "
                                    "(sky reaches pods only through exec and portforward): {}",
                                    ns_, e.message()));
                throw BootstrapError(i, p->name, "check", e.what());
            } catch (const Error& e) {
                throw BootstrapError(i, p->name, "check", e.what());
            }
        }
        if (!p->announced) {
            emit(InstanceProvisioned{p->name, i, false, "kubernetes", p->ip, p->node_name,
                                     cfg_.hourly_price, std::nullopt});
            emit(BootstrapStarting{p->name});
            auto bring = make_bring_up(i, *p);
            bring->prepare(emit);
            std::lock_guard lk(m_);
            p->bring = std::move(bring);
        }
        p->bring->launch(emit);
        NodeStart s;
        s.instance.id = p->name;
        s.instance.node = i;
        s.instance.provider = "kubernetes";
        s.instance.instance_type = p->node_name.empty() ? std::string("pod") : p->node_name;
        s.instance.public_ip = p->ip;
        s.instance.private_ip = p->ip;
        s.instance.hourly_price = cfg_.hourly_price;
        s.instance.on_demand_price = cfg_.hourly_price;
        s.token = p->bring->token();
        try {
            s.stream = p->bring->connect(seconds(30));
        } catch (const std::exception& e) {
            throw BootstrapError(i, p->name, "connect",
                                 fmt::format("cannot reach the worker in pod {}/{} through a "
                                             "port-forward to its port {}: {}",
                                             ns_, p->name, p->bring->port(), e.what()));
        }
        if (!p->announced) emit(BootstrapCompleted{p->name});
        std::lock_guard lk(m_);
        p->announced = true;
        return s;
    }

    NodeExit exit_reason(int i) override {
        Pod p;
        Seen seen;
        {
            std::lock_guard lk(m_);
            Pod& kept = pods_.at(i);
            p.name = kept.name;
            if (auto it = seen_.find(kept.name); it != seen_.end()) seen = it->second;
        }
        const std::string where = fmt::format("pod {}/{}", ns_, p.name);
        if (stopping_) return {NodeLostError::Reason::unreachable, where + ": the pool is closing"};
        std::optional<json> now;
        try {
            now = api_->get_if(api_->core("pods/" + p.name));
        } catch (const std::exception& e) {
            mark_lost(i);
            return {NodeLostError::Reason::unreachable,
                    fmt::format("{}: the API server did not say what became of it: {}", where,
                                e.what())};
        }
        const auto preempted = [&](const std::string& why) {
            mark_lost(i);
            return NodeExit{NodeLostError::Reason::preempted, where + ": " + why};
        };
        if (!now) {
            if (seen.disruption) return preempted("DisruptionTarget " + *seen.disruption);
            if (seen.deleting && seen.grace > 0)
                return preempted(fmt::format(
                    "deleted by someone else than sky with a grace period of {} s (an eviction, "
                    "a preemption)",
                    seen.grace));
            mark_lost(i);
            return {NodeLostError::Reason::unreachable,
                    where + " vanished: deleted without a grace period, or its node went away"};
        }
        const PodView v = view_pod(*now);
        if (v.disruption) return preempted("DisruptionTarget " + *v.disruption);
        if (v.deleting && v.grace_seconds > 0)
            return preempted(fmt::format(
                "deleted by someone else than sky with a grace period of {} s (an eviction, a "
                "preemption)",
                v.grace_seconds));
        if (v.reason == "Evicted") return preempted(with_message("evicted by its node", v.message));
        if (v.deleting || v.phase == "Unknown") {
            mark_lost(i);
            return {NodeLostError::Reason::unreachable,
                    fmt::format("{} is {} (its node went away, or it was deleted at once)", where,
                                v.deleting ? "being deleted" : "in phase Unknown")};
        }
        if (v.terminated || v.phase == "Failed" || v.phase == "Succeeded") {
            mark_lost(i);
            return {NodeLostError::Reason::worker_crashed,
                    fmt::format("the container of {} ended: {}, exit code {}{}", where,
                                v.terminated_reason.empty() ? v.reason : v.terminated_reason,
                                v.exit_code, v.message.empty() ? "" : " (" + v.message + ")")};
        }
        // The pod runs: its worker ended. How, its launcher says.
        NodeBringUp* bring = nullptr;
        {
            std::lock_guard lk(m_);
            bring = pods_.at(i).bring.get();
        }
        if (!bring) return {NodeLostError::Reason::unreachable, where + ": no worker was started"};
        return bring->exit_reason();
    }

    bool can_restart(int) const override { return !stopping_; }

    void begin_stop() noexcept override { stopping_ = true; }

    void stop_all() noexcept override {
        if (stopped_.exchange(true)) return;
        stopping_ = true;
        if (monitor_.joinable()) monitor_.join();
        if (!api_) return;
        if (!created_) {
            // Nothing was made (the API refused the ConfigMap): nothing for `sky gc` either.
            if (ledger_ && !ref_.empty()) ledger_->instance_gone(ref_);
            return;
        }
        try {
            {
                std::lock_guard lk(m_);
                for (auto& [i, p] : pods_) ours_.insert(p.name);
            }
            teardown();
        } catch (const std::exception& e) {
            leftovers_.push_back(
                fmt::format("kubernetes pool {} in {}: {}", pool_id_, region_, e.what()));
        } catch (...) {
        }
    }

    std::vector<std::string> leftovers() const override { return leftovers_; }

private:
    void emit_now(Event e) {
        std::lock_guard lk(emit_m_);
        if (emit_) emit_(std::move(e));
    }

    [[noreturn]] void refused(const std::string& what, const ApiError& e) const {
        if (e.status() == 0)
            throw ProvisionError(
                fmt::format("kubernetes: cannot {} in {}: the API server {} did "
                            "not answer: {}",
                            what, region_, api_->target().cluster.server, e.message()));
        throw ProvisionError(fmt::format("kubernetes: cannot {} in {}: {}{}: {}", what, region_,
                                         e.status(), e.reason().empty() ? "" : " " + e.reason(),
                                         e.message()));
    }

    std::string selector() const { return "?labelSelector=" + pool_selector(pool_id_); }

    std::string default_image() const {
        if (!cfg_.image.empty()) return cfg_.image;
        std::string env = env_or("SKY_KUBERNETES_IMAGE");
        if (!env.empty()) return env;
        return gpu_ ? kDefaultGpuImage : kDefaultImage;
    }

    // Creates node i's pod (a fresh name) and records it.
    void create_pod(int i) {
        PodPlan plan;
        plan.pool_id = pool_id_;
        plan.node = i;
        plan.image = default_image();
        plan.node_selector = cfg_.node_selector;
        plan.labels = cfg_.labels;
        plan.annotations = cfg_.annotations;
        for (const auto& t : cfg_.tolerations) plan.tolerations.push_back(parse_toleration(t));
        plan.gpu = gpu_;
        plan.affinity = affinity_;
        plan.cpu = spec_.cpu;
        plan.memory = spec_.memory;
        plan.active_deadline = spec_.timeout + seconds(600);
        plan.owner_uid = owner_uid_;
        plan.command = {"bash",    "-c",       std::string(scripts::pod_main_sh()),
                        "sky-pod", state_dir_, std::to_string(kFirstWorkerWait.count())};
        for (int attempt = 0;; ++attempt) {
            plan.name = pod_name(pool_id_, i, random_hex(4));
            Pod p;
            p.name = plan.name;
            p.created = Clock::now();
            try {
                const json made = api_->call("POST", api_->core("pods"), pod_manifest(plan));
                p.uid = made["metadata"].value("uid", "");
            } catch (const ApiError& e) {
                if (e.reason() == "AlreadyExists" && attempt < 2) continue;  // another name
                if (e.status() == 0 || e.status() >= 500) {
                    // The answer was lost: the pod may exist. It carries the pool's label, so
                    // teardown finds it; it is looked up once by name here.
                    try {
                        if (auto got = api_->get_if(api_->core("pods/" + plan.name))) {
                            p.uid = (*got)["metadata"].value("uid", "");
                            std::lock_guard lk(m_);
                            pods_[i] = std::move(p);
                            return;
                        }
                    } catch (...) {
                    }
                }
                refused(fmt::format("create pod {} (node {})", plan.name, i), e);
            }
            std::lock_guard lk(m_);
            pods_[i] = std::move(p);
            return;
        }
    }

    // Waits until every pod of `nodes` runs with an address, from the pool's watch (a list at
    // the start and whenever the watch fails). Each change of a pod's scheduling or image
    // message is an event; a pod unscheduled at queue_timeout, an image that cannot be pulled, a
    // pod that ended or was deleted before it ran fail the pool with the cluster's words.
    void wait_running(const std::vector<int>& nodes, const std::function<void(Event)>& emit) {
        std::map<std::string, json> latest;
        std::map<std::string, std::string> said_schedule, said_image;
        std::string rv;
        for (;;) {
            if (stopping_) throw ProvisionError("kubernetes: the pool is closing");
            if (rv.empty()) {
                json list;
                try {
                    list = api_->call("GET", api_->core("pods") + selector());
                } catch (const ApiError& e) {
                    refused("list the pool's pods", e);
                }
                rv = list["metadata"].value("resourceVersion", "");
                latest.clear();
                for (auto& item : list.value("items", json::array()))
                    latest[item["metadata"].value("name", "")] = item;
            } else {
                try {
                    for (auto& e : api_->watch(api_->core("pods") + selector(), rv, seconds(1))) {
                        const std::string v =
                            e.object.value("metadata", json::object()).value("resourceVersion", "");
                        if (!v.empty()) rv = v;
                        if (e.type == "BOOKMARK") continue;
                        const std::string name = e.object["metadata"].value("name", "");
                        if (e.type == "DELETED")
                            latest.erase(name);
                        else
                            latest[name] = e.object;
                    }
                } catch (const std::exception&) {
                    rv.clear();  // 410 Gone or a failed round: list again
                    std::this_thread::sleep_for(milliseconds(300));
                    continue;
                }
            }
            bool all = true;
            for (int i : nodes) {
                Pod* p = nullptr;
                {
                    std::lock_guard lk(m_);
                    p = &pods_.at(i);
                }
                const std::string where = fmt::format("pod {}/{}", ns_, p->name);
                auto it = latest.find(p->name);
                if (it == latest.end()) {
                    all = false;
                    if (Clock::now() - p->created > seconds(15))
                        throw ProvisionError(
                            fmt::format("kubernetes: {} vanished before it ran", where));
                    continue;
                }
                const PodView v = view_pod(it->second);
                if (v.running() && !v.ip.empty()) {
                    std::lock_guard lk(m_);
                    p->ip = v.ip;
                    p->node_name = v.node_name;
                    continue;
                }
                all = false;
                if (v.deleting)
                    throw ProvisionError(fmt::format(
                        "kubernetes: {} was deleted (by someone else than sky) before it ran",
                        where));
                if (v.terminated || v.phase == "Failed" || v.phase == "Succeeded")
                    throw ProvisionError(fmt::format(
                        "kubernetes: {} ended before it ran: {}", where,
                        with_message(v.terminated_reason.empty() ? v.reason : v.terminated_reason,
                                     v.message)));
                if (image_failure(v.waiting_reason))
                    throw ProvisionError(fmt::format(
                        "kubernetes: {} cannot start its image {}: {}", where, default_image(),
                        with_message(v.waiting_reason, v.waiting_message)));
                if (!v.unschedulable.empty() && said_schedule[p->name] != v.unschedulable) {
                    said_schedule[p->name] = v.unschedulable;
                    emit(BootstrapProgress{p->name, "schedule: " + v.unschedulable});
                }
                if (!v.waiting_reason.empty() && v.waiting_reason != "ContainerCreating") {
                    const std::string now = with_message(v.waiting_reason, v.waiting_message);
                    if (said_image[p->name] != now) {
                        said_image[p->name] = now;
                        emit(BootstrapProgress{p->name, "image: " + now});
                    }
                }
                const auto waited = std::chrono::duration_cast<seconds>(Clock::now() - p->created);
                if (v.node_name.empty() && waited >= cfg_.queue_timeout)
                    throw ProvisionError(fmt::format(
                        "kubernetes: {} was still unscheduled after {} s (queue_timeout {} s): {}",
                        where, waited.count(), cfg_.queue_timeout.count(),
                        v.unschedulable.empty() ? std::string("the scheduler gave no reason")
                                                : v.unschedulable));
            }
            if (all) return;
        }
    }

    // The pool's pods as the cluster changes them, while the pool lives: a deletion or a
    // disruption that sky did not ask for is remembered, so that exit_reason() can say the pod
    // was preempted even when it is gone by the time the pool asks.
    void monitor() {
        std::string rv;
        while (!stopping_) {
            try {
                std::vector<json> objects;
                if (rv.empty()) {
                    json list = api_->call("GET", api_->core("pods") + selector());
                    rv = list["metadata"].value("resourceVersion", "");
                    for (auto& item : list.value("items", json::array())) objects.push_back(item);
                } else {
                    for (auto& e : api_->watch(api_->core("pods") + selector(), rv, seconds(1))) {
                        const std::string v =
                            e.object.value("metadata", json::object()).value("resourceVersion", "");
                        if (!v.empty()) rv = v;
                        if (e.type != "BOOKMARK") objects.push_back(e.object);
                    }
                }
                std::vector<PreemptionNotice> notices;
                {
                    std::lock_guard lk(m_);
                    for (const auto& o : objects) {
                        const PodView v = view_pod(o);
                        if (ours_.count(v.name)) continue;
                        Seen& s = seen_[v.name];
                        if (v.deleting && !s.deleting) {
                            s.deleting = true;
                            s.grace = v.grace_seconds;
                            if (v.grace_seconds > 0) notices.push_back(notice_of(v, false));
                        }
                        if (v.disruption && !s.disruption)
                            notices.push_back(notice_of(v, !v.deleting));
                        if (v.disruption) s.disruption = v.disruption;
                        if (v.reason == "Evicted") s.evicted = v.message;
                    }
                }
                // Outside the lock: the pool's desk fans the notice out to every rank.
                for (auto& n : notices)
                    if (n.node >= 0 && !stopping_) emit_now(std::move(n));
            } catch (...) {
                rv.clear();
                for (int k = 0; k < 10 && !stopping_; ++k)
                    std::this_thread::sleep_for(milliseconds(100));
            }
        }
    }

    // The preemption notice of a pod that someone else than sky is taking away (api.md §10a):
    // its deletion with a grace period (an eviction, a drain, a preemption: deletionTimestamp is
    // when the kubelet kills it) or its DisruptionTarget condition (then the deletion follows,
    // with the pod's own grace period). Under m_.
    PreemptionNotice notice_of(const PodView& v, bool by_condition) const {
        PreemptionNotice n;
        n.node = -1;
        for (const auto& [i, p] : pods_)
            if (p.name == v.name) n.node = i;
        n.instance_id = v.name;
        const auto at = parse_rfc3339(v.deletion_time);
        n.deadline = at && !by_condition
                         ? *at
                         : std::chrono::system_clock::now() +
                               seconds(v.grace_seconds > 0 ? v.grace_seconds : kTerminationGrace);
        const std::string where = fmt::format("pod {}/{}", ns_, v.name);
        n.reason =
            v.disruption && by_condition
                ? fmt::format("{} is to be disrupted (DisruptionTarget {})", where, *v.disruption)
                : fmt::format(
                      "{} is being deleted by someone else than sky (an eviction, "
                      "a drain, a preemption) with a grace period of {} s",
                      where, v.grace_seconds);
        return n;
    }

    void mark_lost(int i) {
        std::lock_guard lk(m_);
        pods_.at(i).lost = true;
    }

    // A new pod for node i in place of the lost one, which is deleted at once.
    void replace(int i, const std::function<void(Event)>& emit) {
        if (stopping_) throw ProvisionError("kubernetes: the pool is closing; no replacement pod");
        std::string old;
        {
            std::lock_guard lk(m_);
            old = pods_.at(i).name;
            ours_.insert(old);
        }
        {
            std::unique_ptr<NodeBringUp> gone;
            {
                std::lock_guard lk(m_);
                gone = std::move(pods_.at(i).bring);
            }
            if (shipment_) shipment_->forget(i);
        }
        try {
            delete_pod(old, 0);
        } catch (...) {  // teardown deletes it by label
        }
        create_pod(i);
        wait_running({i}, emit);
    }

    void delete_pod(const std::string& name, int grace) {
        try {
            api_->call("DELETE", api_->core("pods/" + name),
                       json{{"apiVersion", "v1"},
                            {"kind", "DeleteOptions"},
                            {"gracePeriodSeconds", grace}});
        } catch (const ApiError& e) {
            if (e.status() != 404) throw;
        }
    }

    std::shared_ptr<ship::PoolShipment> shipment() {
        std::lock_guard lk(m_);
        if (!shipment_) shipment_ = std::make_shared<ship::PoolShipment>(ship::this_program());
        return shipment_;
    }

    // Node i's bring-up over its pod's shell (providers/remote/bring_up.hpp): the program
    // shipped through exec (each file's hash checked in the pod), the image's bootstrap, the
    // launcher on 127.0.0.1 (the port-forward connects from inside the pod); when its worker
    // ends idle (the client is gone) the launcher tells the pod's main process to end the pod.
    std::unique_ptr<NodeBringUp> make_bring_up(int i, const Pod& p) {
        BringUpOptions o;
        o.instance_id = p.name;
        o.shipment = shipment();
        o.peer_address = p.ip;
        // Everything comes from the client: a pod's address is on a network sky neither owns
        // nor fences, where a transfer token would go to whoever listens there.
        o.peer_transfers = false;
        o.listen_host = "127.0.0.1";
        // The first connection comes through the API server after the launcher answered.
        o.min_accept_timeout = seconds(30);
        o.release_on_idle = {"sh", "-c", "touch \"$0/end\"", state_dir_};
        return std::make_unique<NodeBringUp>(*p.shell, spec_, pool_id_, i, std::move(o));
    }

    // The pool's objects deleted and confirmed gone: the ConfigMap (background propagation),
    // the pods by label with a short grace period, listed until none is left; stragglers
    // (a kubelet that never confirms) are force-deleted, with an ErrorEvent.
    void teardown() {
        std::string trouble;
        try {
            api_->call("DELETE", api_->core("configmaps/" + owner_name(pool_id_)),
                       json{{"apiVersion", "v1"},
                            {"kind", "DeleteOptions"},
                            {"propagationPolicy", "Background"}});
        } catch (const ApiError& e) {
            if (e.status() != 404) trouble = e.what();
        }
        try {
            api_->call("DELETE", api_->core("pods") + selector() +
                                     "&gracePeriodSeconds=" + std::to_string(kDeleteGrace));
        } catch (const ApiError& e) {
            if (e.status() != 404) trouble = e.what();
        }
        auto left = [&] {
            std::vector<std::string> names;
            for (auto& item :
                 api_->call("GET", api_->core("pods") + selector()).value("items", json::array()))
                names.push_back(item["metadata"].value("name", ""));
            return names;
        };
        auto wait_gone = [&](Clock::duration limit) {
            const auto until = Clock::now() + limit;
            std::vector<std::string> l;
            for (int k = 0; k < 600; ++k) {
                try {
                    l = left();
                } catch (const std::exception& e) {
                    trouble = e.what();
                }
                if (l.empty() || Clock::now() >= until) break;
                std::this_thread::sleep_for(milliseconds(500));
            }
            return l;
        };
        std::vector<std::string> still = wait_gone(kGoneLimit);
        if (!still.empty()) {
            emit_now(ErrorEvent{
                fmt::format("kubernetes: {} still there {} s after their deletion (a kubelet "
                            "that does not confirm); force-deleted",
                            join(still, ", "), kGoneLimit.count()),
                std::nullopt});
            for (const auto& n : still) {
                try {
                    delete_pod(n, 0);
                } catch (const std::exception& e) {
                    trouble = e.what();
                }
            }
            still = wait_gone(kForcedLimit);
        }
        bool owner_left = false;
        try {
            owner_left = api_->get_if(api_->core("configmaps/" + owner_name(pool_id_))).has_value();
        } catch (...) {
            owner_left = true;
        }
        if (still.empty() && !owner_left) {
            if (ledger_) ledger_->instance_gone(ref_);
            return;
        }
        std::string what;
        if (!still.empty()) what = "pods " + join(still, ", ");
        if (owner_left)
            what +=
                (what.empty() ? "" : " and ") + std::string("ConfigMap ") + owner_name(pool_id_);
        leftovers_.push_back(fmt::format("kubernetes {} in {} (label {}={}){}", what, region_,
                                         kPoolLabel, pool_id_,
                                         trouble.empty() ? "" : ": " + trouble));
    }

    PoolSpec spec_;
    Kubernetes cfg_;
    std::string pool_id_;
    Ledger* ledger_ = nullptr;
    std::string state_dir_;  // the pods' state directory (scripts/pod_main.sh)

    std::shared_ptr<KubeApi> api_;
    std::string ns_, region_, ref_, owner_uid_;
    std::optional<GpuLimit> gpu_;
    json affinity_;
    bool created_ = false;  // something may exist in the cluster

    std::mutex emit_m_;
    std::function<void(Event)> emit_;
    mutable std::mutex m_;
    std::map<int, Pod> pods_;
    std::set<std::string> ours_;        // pods sky itself deleted (or deletes at teardown)
    std::map<std::string, Seen> seen_;  // what the watch saw of the others
    std::shared_ptr<ship::PoolShipment> shipment_;
    std::thread monitor_;
    std::atomic<bool> stopping_{false};
    std::atomic<bool> stopped_{false};
    std::vector<std::string> leftovers_;
};

}  // namespace

ProviderDescriptor kubernetes_provider() {
    ProviderDescriptor d({
        // Pods reach each other's addresses on the cluster's network, which sky neither owns nor
        // fences (no NetworkPolicy is made): every other pod of the cluster can reach the ranks'
        // services unless the cluster's own policies stop it.
        .exposure =
            [](const PoolSpec&) {
                return Exposure::open_to_others(fmt::format(
                    "this distributed call runs in pods whose addresses every other pod of the "
                    "cluster can reach unless a NetworkPolicy of the namespace stops it: {} "
                    "(docs/distributed.md)",
                    rendezvous_services));
            },
        .billing = BillingPolicy{},  // per second at .hourly_price: a cluster has no price list
        .runs_on_this_machine = false,
    });
    d.validate = [](const PoolSpec& spec, std::vector<std::string>& problems) {
        const Kubernetes* k = spec.provider.get<Kubernetes>();
        if (!k) return;
        if (k->queue_timeout.count() <= 0)
            problems.push_back(
                fmt::format("provider: sky::Kubernetes queue_timeout must be positive, got {} s",
                            k->queue_timeout.count()));
        if (k->hourly_price < 0)
            problems.push_back(
                fmt::format("provider: sky::Kubernetes hourly_price must not be negative, got {}",
                            k->hourly_price));
        for (const auto& t : k->tolerations) {
            try {
                (void)parse_toleration(t);
            } catch (const ConfigError& e) {
                problems.push_back(std::string("provider: ") + e.what());
            }
        }
        check_metadata(k->labels, true, "labels", problems);
        check_metadata(k->annotations, false, "annotations", problems);
        check_metadata(k->node_selector, true, "node_selector", problems);
        if (spec.memory) {
            try {
                (void)memory_quantity(*spec.memory);
            } catch (const ConfigError& e) {
                problems.push_back(e.what());
            }
        }
        if (!spec.volumes.empty())
            problems.push_back(
                "volumes: sky::Kubernetes pools mount no volumes in this build (use the image's "
                "or the cluster's storage)");
        if (spec.machine)
            problems.push_back(
                "machine: a Kubernetes cluster has no machine types here; use sky::Kubernetes's "
                "node_selector");
    };
    d.make_backend = [](const BackendContext& c) -> std::unique_ptr<Backend> {
        return std::make_unique<KubernetesBackend>(c.spec, c.pool_id, c.ledger);
    };
    // The environment's kubeconfig; where there is none, one that a pool's ledger on this
    // machine recorded (so that `sky ls` and `sky gc` reach the pools that ran there).
    d.credentials = [] {
        CredentialStatus s;
        const auto found = [&](const KubeTarget& t, const std::string& via) {
            s.present = true;
            s.source = fmt::format("{} (context {}, user {}){}", t.source,
                                   t.context.empty() ? "in-cluster" : t.context, t.user_name, via);
            s.endpoint = t.cluster.server;
            if (!t.token.empty()) s.secrets.push_back(t.token);
        };
        try {
            KubeconfigRequest r;
            r.context = env_or("SKY_KUBERNETES_CONTEXT");
            found(load_kubeconfig(r), "");
            return s;
        } catch (const std::exception& e) {
            s.source = e.what();
        }
        std::string unreadable;
        for (const auto& ref : recorded_refs()) {
            if (ref.files().empty()) continue;  // in-cluster: the environment's, which failed
            try {
                KubeconfigRequest r;
                r.files = ref.files();
                r.context = ref.context;
                r.ns = ref.ns;
                found(load_kubeconfig(r), ", as pool " + ref.pool_id + "'s ledger records it");
                return s;
            } catch (const std::exception& e) {
                unreadable += fmt::format(
                    "; pool {}'s ledger names the kubeconfig {} (context \"{}\"), which cannot "
                    "be used: {}",
                    ref.pool_id, ref.kubeconfig, ref.context, e.what());
            }
        }
        if (!unreadable.empty())
            s.source += unreadable + "; set KUBECONFIG to a kubeconfig of that cluster";
        return s;
    };
    // `sky ls` and `sky gc` reach the cluster through the inventory: sky's pods by label, and a
    // dead pool's ConfigMap and pods through the kubeconfig its ledger names.
    add_cloud_gc(d, [](std::string_view) { return make_inventory(); });
    return d;
}

}  // namespace sky::detail
