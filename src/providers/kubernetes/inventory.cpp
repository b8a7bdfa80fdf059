#include "providers/kubernetes/inventory.hpp"

#include <fmt/format.h>

#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>

#include "ledger/ledger.hpp"
#include "providers/kubernetes/api.hpp"
#include "providers/kubernetes/pods.hpp"
#include "util/encoding.hpp"
#include "util/env.hpp"
#include "util/text.hpp"

namespace sky::detail::kubernetes {

std::string PoolRef::to_string() const {
    return fmt::format("kubernetes:{}:{}:{}:{}", url_encode(pool_id), url_encode(ns),
                       url_encode(context), url_encode(kubeconfig, true));
}

std::optional<PoolRef> PoolRef::parse(const std::string& text) {
    constexpr std::string_view prefix = "kubernetes:";
    if (text.rfind(prefix, 0) != 0) return std::nullopt;
    std::vector<std::string> f;
    std::string rest = text.substr(prefix.size());
    for (int k = 0; k < 3; ++k) {
        const auto c = rest.find(':');
        if (c == std::string::npos) return std::nullopt;
        f.push_back(url_decode(rest.substr(0, c)));
        rest = rest.substr(c + 1);
    }
    PoolRef r{f[0], f[1], f[2], url_decode(rest)};
    if (r.pool_id.empty() || r.ns.empty()) return std::nullopt;
    return r;
}

std::vector<std::filesystem::path> PoolRef::files() const {
    std::vector<std::filesystem::path> out;
    std::stringstream in(kubeconfig);
    for (std::string f; std::getline(in, f, ':');)
        if (!f.empty()) out.emplace_back(f);
    return out;
}

std::vector<PoolRef> recorded_refs() {
    std::vector<PoolRef> out;
    try {
        for (const auto& r : Ledger::read_all()) {
            // A pool that ended with nothing left needs no lookup (its cluster may be gone).
            if (r.provider != "kubernetes" || (r.closed && !r.leaves_something())) continue;
            for (const auto& id : r.instances)
                if (auto ref = PoolRef::parse(id)) out.push_back(std::move(*ref));
        }
    } catch (...) {
    }
    return out;
}

namespace {

using State = CloudInstance::State;

CloudInstance machine_of(const nlohmann::json& pod) {
    const PodView v = view_pod(pod);
    CloudInstance c;
    c.id = v.name;
    c.pool_id = v.pool_id;
    c.public_ip = v.ip;
    c.private_ip = v.ip;
    c.instance_type = v.node_name.empty() ? std::string("pod") : v.node_name;
    c.launched = v.created;
    c.reason = v.reason.empty() ? v.unschedulable : v.reason + ": " + v.message;
    if (v.deleting)
        c.state = State::stopping;
    else if (v.phase == "Running")
        c.state = State::running;
    else if (v.phase == "Succeeded" || v.phase == "Failed")
        c.state = State::stopping;  // ended, but the object is there until it is deleted
    else
        c.state = State::pending;
    return c;
}

// The pool id in a pod name of sky's ("sky-<16 hex>-n<i>-<4 hex>"); empty otherwise.
std::string pool_of_pod(const std::string& name) {
    if (name.size() < 4 + 16 || name.rfind("sky-", 0) != 0) return {};
    const std::string id = name.substr(4, 16);
    if (id.find_first_not_of("0123456789abcdef") != std::string::npos) return {};
    if (name.compare(20, 2, "-n") != 0) return {};
    return id;
}

class KubernetesInventory final : public MachineInventory {
public:
    // The places the pools this machine's ledgers know of ran in: gc and ls reach them there,
    // whatever the environment names.
    KubernetesInventory() {
        for (const auto& ref : recorded_refs()) refs_.emplace(ref.pool_id, ref);
    }

    std::string name() const override { return "kubernetes"; }

    std::vector<CloudInstance> describe(const std::vector<std::string>& ids) override {
        for (const auto& id : ids)
            if (auto ref = PoolRef::parse(id)) remember(*ref);
        std::vector<CloudInstance> out;
        for (const auto& id : ids) {
            CloudInstance c;
            c.id = id;
            c.state = State::unknown;
            if (auto ref = PoolRef::parse(id)) {
                auto& api = api_for(*ref);
                c.pool_id = ref->pool_id;
                c.instance_type = "pool";
                const bool owner =
                    api.get_if(api.core("configmaps/" + owner_name(ref->pool_id), ref->ns))
                        .has_value();
                const auto pods = api.call("GET", api.core("pods", ref->ns) + "?labelSelector=" +
                                                      pool_selector(ref->pool_id));
                bool live = false, any = false;
                for (const auto& p : pods.value("items", nlohmann::json::array())) {
                    any = true;
                    live = live || !view_pod(p).deleting;
                }
                c.state = (owner || live) ? State::running : any ? State::stopping : State::gone;
            } else {
                auto [api, ns] = api_of_pool(pool_of_pod(id));
                if (auto p = api->get_if(api->core("pods/" + url_encode(id), ns)))
                    c = machine_of(*p);
                else
                    c.state = State::gone;
            }
            out.push_back(std::move(c));
        }
        return out;
    }

    void terminate(const std::vector<std::string>& ids) override {
        std::string failures;
        for (const auto& id : ids) {
            try {
                if (auto ref = PoolRef::parse(id)) {
                    remember(*ref);
                    delete_pool(api_for(*ref), ref->ns, ref->pool_id, 5);
                } else {
                    auto [api, ns] = api_of_pool(pool_of_pod(id));
                    delete_ignoring_absent(*api, api->core("pods/" + url_encode(id), ns), 5);
                }
            } catch (const std::exception& e) {
                failures += (failures.empty() ? "" : "; ") + id + ": " + e.what();
            }
        }
        if (!failures.empty()) throw Error("kubernetes: " + failures);
    }

    // sky's pods in the default kubeconfig's context and namespace, and in every place a pool
    // of this machine's ledgers ran in (each pod once). Throws ConfigError when none of them
    // can be reached, naming why.
    std::vector<CloudInstance> list(std::string_view pool_id) override {
        std::vector<std::pair<KubeApi*, std::string>> places;
        std::string why;
        try {
            places.emplace_back(&default_api(), std::string());
        } catch (const ConfigError& e) {
            why = e.what();
        }
        std::vector<PoolRef> refs;
        {
            std::lock_guard lk(m_);
            for (const auto& [id, ref] : refs_) refs.push_back(ref);
        }
        std::vector<std::string> unreadable;
        for (const auto& ref : refs) {
            try {
                places.emplace_back(&api_for(ref), ref.ns);
            } catch (const ConfigError& e) {
                unreadable.push_back(e.what());
            }
        }
        if (places.empty())
            throw ConfigError(fmt::format(
                "kubernetes: no kubeconfig to list sky's pods with: {}{}", why,
                unreadable.empty() ? std::string()
                                   : "; and the pools' ledgers name none that can be read: " +
                                         join(unreadable, "; ")));
        std::set<std::string> seen;  // server, namespace, pod uid
        std::vector<CloudInstance> out;
        // The default place's failure is the listing's; a recorded place that does not answer
        // (a cluster since gone) is skipped: its pools are still looked up by their refs.
        std::optional<ApiError> recorded_failure;
        bool answered = false;
        for (std::size_t k = 0; k < places.size(); ++k) {
            auto& [api, ns] = places[k];
            const std::string where =
                api->target().cluster.server + "\n" + (ns.empty() ? api->target().ns : ns);
            if (!seen.insert(where).second) continue;
            nlohmann::json pods;
            try {
                pods = api->call("GET", api->core("pods", ns) + "?labelSelector=" +
                                            pool_selector(std::string(pool_id)));
            } catch (const ApiError& e) {
                if (k == 0 && ns.empty()) throw;
                recorded_failure = e;
                continue;
            }
            answered = true;
            for (const auto& p : pods.value("items", nlohmann::json::array()))
                out.push_back(machine_of(p));
        }
        if (!answered && recorded_failure) throw *recorded_failure;
        return out;
    }

    void delete_infra(std::string_view pool_id) noexcept override {
        try {
            auto [api, ns] = api_of_pool(std::string(pool_id));
            delete_ignoring_absent(
                *api, api->core("configmaps/" + owner_name(std::string(pool_id)), ns), 0);
        } catch (...) {
        }
    }

    std::vector<std::string> infra_left(std::string_view pool_id) noexcept override {
        const std::string cm = owner_name(std::string(pool_id));
        try {
            auto [api, ns] = api_of_pool(std::string(pool_id));
            if (api->get_if(api->core("configmaps/" + cm, ns)))
                return {fmt::format("ConfigMap {}/{}", ns.empty() ? api->target().ns : ns, cm)};
            return {};
        } catch (const std::exception& e) {
            // Not known to be gone: said, so that gc does not close the pool's ledger.
            return {fmt::format("ConfigMap {} (cannot look: {})", cm, e.what())};
        }
    }

    // Deletes a pool's ConfigMap (its pods follow through the garbage collector) and its pods by
    // label (whatever the collector has not reached yet, or pods of a pool whose ConfigMap was
    // never made).
    static void delete_pool(KubeApi& api, const std::string& ns, const std::string& pool_id,
                            int grace) {
        delete_ignoring_absent(api, api.core("configmaps/" + owner_name(pool_id), ns), -1);
        api.call("DELETE", api.core("pods", ns) + "?labelSelector=" + pool_selector(pool_id) +
                               "&gracePeriodSeconds=" + std::to_string(grace));
    }

    // grace < 0: background propagation (a ConfigMap's dependents).
    static void delete_ignoring_absent(KubeApi& api, const std::string& path, int grace) {
        nlohmann::json body = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}};
        if (grace >= 0)
            body["gracePeriodSeconds"] = grace;
        else
            body["propagationPolicy"] = "Background";
        try {
            api.call("DELETE", path, body);
        } catch (const ApiError& e) {
            if (e.status() != 404) throw;
        }
    }

private:
    void remember(const PoolRef& ref) {
        std::lock_guard lk(m_);
        refs_.insert_or_assign(ref.pool_id, ref);
    }

    // Where pool `pool_id` ran, as its ledger recorded it; else the default kubeconfig's
    // context and namespace ("" as the namespace: the target's own).
    std::pair<KubeApi*, std::string> api_of_pool(const std::string& pool_id) {
        std::optional<PoolRef> ref;
        {
            std::lock_guard lk(m_);
            if (auto it = refs_.find(pool_id); it != refs_.end()) ref = it->second;
        }
        if (ref) return {&api_for(*ref), ref->ns};
        return {&default_api(), std::string()};
    }

    KubeApi& default_api() {
        KubeconfigRequest r;
        r.context = env_or("SKY_KUBERNETES_CONTEXT");
        r.ns = env_or("SKY_KUBERNETES_NAMESPACE");
        return get(r);
    }

    // The cluster a pool ran in: the kubeconfig files, context and namespace its ledger
    // recorded; where those files cannot be read any more, the environment's kubeconfig (the
    // one KUBECONFIG or ~/.kube/config names) with the recorded context. A ConfigError names
    // both when neither works.
    KubeApi& api_for(const PoolRef& ref) {
        KubeconfigRequest r;
        r.files = ref.files();
        r.context = ref.context;
        r.ns = ref.ns;
        try {
            return get(r);
        } catch (const ConfigError& recorded) {
            KubeconfigRequest fallback;
            fallback.context = ref.context;
            fallback.ns = ref.ns;
            try {
                return get(fallback);
            } catch (const ConfigError& named) {
                throw ConfigError(fmt::format(
                    "kubernetes pool {}: its ledger names the kubeconfig {} (context \"{}\", "
                    "namespace {}), which cannot be used: {}; and the environment names none "
                    "that can: {}. Set KUBECONFIG to a kubeconfig of that cluster and run it "
                    "again",
                    ref.pool_id, ref.kubeconfig.empty() ? "(in-cluster)" : ref.kubeconfig,
                    ref.context, ref.ns, recorded.what(), named.what()));
            }
        }
    }

    KubeApi& get(const KubeconfigRequest& r) {
        std::string key = r.kubeconfig + "\n" + r.context + "\n" + r.ns;
        for (const auto& f : r.files) key += "\n" + f.string();
        std::lock_guard lk(m_);
        auto& a = apis_[key];
        if (!a) a = connect_api(r);
        return *a;
    }

    std::mutex m_;
    std::map<std::string, PoolRef> refs_;  // pool id -> where it ran
    std::map<std::string, std::shared_ptr<KubeApi>> apis_;
};

}  // namespace

std::unique_ptr<MachineInventory> make_inventory() {
    return std::make_unique<KubernetesInventory>();
}

}  // namespace sky::detail::kubernetes
