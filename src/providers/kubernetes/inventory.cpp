#include "providers/kubernetes/inventory.hpp"

#include <fmt/format.h>

#include <map>
#include <mutex>
#include <sstream>

#include "providers/kubernetes/api.hpp"
#include "providers/kubernetes/pods.hpp"
#include "util/encoding.hpp"
#include "util/env.hpp"

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

class KubernetesInventory final : public MachineInventory {
public:
    std::string name() const override { return "kubernetes"; }

    std::vector<CloudInstance> describe(const std::vector<std::string>& ids) override {
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
                const auto pods = api.call(
                    "GET", api.core("pods", ref->ns) + "?labelSelector=" +
                               pool_selector(ref->pool_id));
                bool live = false, any = false;
                for (const auto& p : pods.value("items", nlohmann::json::array())) {
                    any = true;
                    live = live || !view_pod(p).deleting;
                }
                c.state = (owner || live) ? State::running : any ? State::stopping : State::gone;
            } else {
                auto& api = default_api();
                if (auto p = api.get_if(api.core("pods/" + url_encode(id))))
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
                    auto& api = api_for(*ref);
                    delete_pool(api, ref->ns, ref->pool_id, 5);
                } else {
                    auto& api = default_api();
                    delete_ignoring_absent(api, api.core("pods/" + url_encode(id)), 5);
                }
            } catch (const std::exception& e) {
                failures += (failures.empty() ? "" : "; ") + id + ": " + e.what();
            }
        }
        if (!failures.empty()) throw Error("kubernetes: " + failures);
    }

    std::vector<CloudInstance> list(std::string_view pool_id) override {
        auto& api = default_api();
        const auto pods = api.call("GET", api.core("pods") + "?labelSelector=" +
                                              pool_selector(std::string(pool_id)));
        std::vector<CloudInstance> out;
        for (const auto& p : pods.value("items", nlohmann::json::array()))
            out.push_back(machine_of(p));
        return out;
    }

    void delete_infra(std::string_view pool_id) noexcept override {
        try {
            auto& api = default_api();
            delete_ignoring_absent(api, api.core("configmaps/" + owner_name(std::string(pool_id))),
                                   0);
        } catch (...) {
        }
    }

    std::vector<std::string> infra_left(std::string_view pool_id) noexcept override {
        try {
            auto& api = default_api();
            const std::string cm = owner_name(std::string(pool_id));
            if (api.get_if(api.core("configmaps/" + cm)))
                return {fmt::format("ConfigMap {}/{}", api.target().ns, cm)};
        } catch (...) {
        }
        return {};
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
    KubeApi& default_api() {
        KubeconfigRequest r;
        r.context = env_or("SKY_KUBERNETES_CONTEXT");
        r.ns = env_or("SKY_KUBERNETES_NAMESPACE");
        return get(r);
    }
    KubeApi& api_for(const PoolRef& ref) {
        KubeconfigRequest r;
        r.kubeconfig = ref.kubeconfig;
        r.context = ref.context;
        r.ns = ref.ns;
        return get(r);
    }
    KubeApi& get(const KubeconfigRequest& r) {
        const std::string key = r.kubeconfig + "\n" + r.context + "\n" + r.ns;
        std::lock_guard lk(m_);
        auto& a = apis_[key];
        if (!a) a = connect_api(r);
        return *a;
    }

    std::mutex m_;
    std::map<std::string, std::shared_ptr<KubeApi>> apis_;
};

}  // namespace

std::unique_ptr<MachineInventory> make_inventory() {
    return std::make_unique<KubernetesInventory>();
}

}  // namespace sky::detail::kubernetes
