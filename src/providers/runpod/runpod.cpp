// sky::RunPod as a cloud adapter over RunPod's GraphQL API (runpod/runpod-python
// api/queries and api/mutations; podRentInterruptable as SkyPilot sends it): gpuTypes for offers
// and prices, podFindAndDeployOnDemand / podRentInterruptable (typed input variables) with the
// node's start script in the pod's env and dockerArgs, pod(input: {podId}) for the state and the
// public port mapped to 22, podTerminate, myself.pods for the sweep by name. REST v1 is switched
// off (2026-11-15); nothing here uses it.
#include "providers/runpod/runpod.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <set>

#include "catalog/names.hpp"
#include "providers/rest/container_boot.hpp"
#include "providers/rest/descriptor.hpp"
#include "providers/rest/json_api.hpp"
#include "providers/runpod/provider.hpp"
#include "util/env.hpp"
#include "util/text.hpp"

namespace sky::detail {

namespace {

using nlohmann::json;
using rest::number_of;
using rest::Repeat;
using rest::text_of;

// A GraphQL answer's first error: {"errors":[{"message", "extensions":{"code"}}]}.
std::optional<ProviderErrorInfo> first_error(const json& j) {
    if (!j.is_object() || !j.contains("errors") || !j["errors"].is_array() || j["errors"].empty())
        return std::nullopt;
    const json& e = j["errors"][0];
    std::string code;
    if (e.contains("extensions") && e["extensions"].is_object())
        code = text_of(e["extensions"], "code");
    return ProviderErrorInfo{code, text_of(e, "message")};
}

std::optional<ProviderErrorInfo> parse_runpod_error(const HttpResponse& r) {
    json j = json::parse(r.body);
    if (auto e = first_error(j)) return e;
    if (j.is_object() && (j.contains("title") || j.contains("detail")))  // problem+json
        return ProviderErrorInfo{text_of(j, "title"), text_of(j, "detail")};
    if (j.is_object() && j.contains("error")) return ProviderErrorInfo{"", text_of(j, "error")};
    return std::nullopt;
}

// RunPod's answers that mean "none of this GPU now" (HTTP 200 with data.<field> null).
bool is_capacity_message(const std::string& message) {
    const std::string m = to_lower(message);
    for (const char* w : {"no longer any instances available", "no instances available",
                          "not enough", "supply_constraint", "out of stock", "no gpus available",
                          "bid is too low", "bid too low", "minimum bid"})
        if (m.find(w) != std::string::npos) return true;
    return false;
}

// RunPod's answers for a GPU type id it does not know (renamed or retired).
bool is_unknown_gpu_message(const std::string& message) {
    const std::string m = to_lower(message);
    return m.find("gpu type") != std::string::npos &&
           (m.find("invalid") != std::string::npos || m.find("unknown") != std::string::npos ||
            m.find("not found") != std::string::npos ||
            m.find("does not exist") != std::string::npos);
}

// The embedded catalog's names ("1x_H100-80GB_SECURE"): the GPU's short name.
std::string short_name(const std::string& accelerator, double memory_gb) {
    if (accelerator_info(accelerator).memory_gb.size() > 1 && memory_gb > 0)
        return fmt::format("{}-{}GB", accelerator, static_cast<int>(std::lround(memory_gb)));
    return accelerator;
}

std::string type_name(int count, const std::string& short_gpu, const std::string& cloud) {
    return fmt::format("{}x_{}_{}", count, short_gpu, cloud);
}

struct ParsedType {
    int count = 0;
    std::string gpu, cloud;
};
std::optional<ParsedType> parse_type(const std::string& t) {
    auto x = t.find("x_");
    auto last = t.rfind('_');
    if (x == std::string::npos || x == 0 || last == std::string::npos || last <= x + 2)
        return std::nullopt;
    try {
        return ParsedType{std::stoi(t.substr(0, x)), t.substr(x + 2, last - x - 2),
                          t.substr(last + 1)};
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

// RunPod's gpuTypeId for the catalog's short names (runpod GPU ids are long display names).
std::vector<std::string> known_gpu_ids(const std::string& short_gpu) {
    static const std::map<std::string, std::vector<std::string>> ids = {
        {"H100-80GB", {"NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe"}},
        {"H100-94GB", {"NVIDIA H100 NVL"}},
        {"A100-80GB", {"NVIDIA A100 80GB PCIe", "NVIDIA A100-SXM4-80GB"}},
        {"H200-141GB", {"NVIDIA H200"}},
        {"L40S", {"NVIDIA L40S"}},
        {"L40", {"NVIDIA L40"}},
        {"L4", {"NVIDIA L4"}},
        {"RTX4090", {"NVIDIA GeForce RTX 4090"}},
        {"RTX3090", {"NVIDIA GeForce RTX 3090"}},
        {"RTXA6000", {"NVIDIA RTX A6000"}},
        {"A40", {"NVIDIA A40"}},
    };
    auto it = ids.find(short_gpu);
    return it == ids.end() ? std::vector<std::string>{} : it->second;
}

const char* kPodFields =
    "id name desiredStatus podType costPerHr gpuCount imageName machineId lastStatusChange "
    "runtime { uptimeInSeconds ports { ip isIpPublic privatePort publicPort type } }";

class RunPodAdapter final : public CloudAdapter {
public:
    explicit RunPodAdapter(const RunPod& cfg) : cloud_type_(to_upper(cfg.cloud_type)) {
        const std::string key = env_or("RUNPOD_API_KEY");
        if (key.empty())
            throw ConfigError(
                "RunPod: no credentials: set RUNPOD_API_KEY to an API key with "
                "read and write access");
        api_ = std::make_unique<rest::JsonApi>(
            rest::bearer_config("RunPod",
                                rest::choose_endpoint(cfg.endpoint, "RunPod{.endpoint}",
                                                      "RUNPOD_API_BASE_URL", kRunPodDefaultUrl),
                                key, parse_runpod_error));
        image_ = env_or("SKY_RUNPOD_IMAGE", "nvidia/cuda:12.8.0-cudnn-runtime-ubuntu24.04");
    }

    std::string name() const override { return "runpod"; }

    std::vector<Offer> live_offers(const Catalog& catalog, const SelectionRequest& req,
                                   const std::function<void(Event)>& emit) override {
        api_->notice_endpoint("API key");
        json data;
        try {
            data = graphql(
                "query GpuTypes { gpuTypes { id displayName manufacturer memoryInGb maxGpuCount "
                "secureCloud communityCloud securePrice communityPrice secureSpotPrice "
                "communitySpotPrice } }");
        } catch (const std::exception& e) {
            emit(ErrorEvent{
                std::string("RunPod: GPU types unavailable, using the catalog's: ") + e.what(),
                std::nullopt});
            return {};
        }
        const std::string today = rest::today_utc();
        std::vector<std::string> clouds;
        if (cloud_type_ == "ALL")
            clouds = {"SECURE", "COMMUNITY"};
        else
            clouds = {cloud_type_};
        std::map<std::string, Offer> best;
        std::lock_guard lk(m_);
        if (!data.contains("gpuTypes") || !data["gpuTypes"].is_array()) return {};
        for (const auto& g : data["gpuTypes"]) {
            const std::string id = text_of(g, "id");
            const double mem = number_of(g, "memoryInGb").value_or(0);
            auto acc = accelerator_from_device_name(id, mem * 1024.0, 1);
            if (!acc)
                acc = accelerator_from_device_name(text_of(g, "displayName"), mem * 1024.0, 1);
            if (!acc || id.empty()) continue;
            const int max_count = rest::int_of(g, "maxGpuCount", 0, 1 << 16).value_or(8);
            for (const auto& cloud : clouds) {
                const bool secure = cloud == "SECURE";
                if (!g.value(secure ? "secureCloud" : "communityCloud", false)) continue;
                auto price = number_of(g, secure ? "securePrice" : "communityPrice");
                if (!price || *price <= 0) continue;
                auto spot = number_of(g, secure ? "secureSpotPrice" : "communitySpotPrice");
                for (int count : {1, 2, 4, 8}) {
                    if (count > max_count) break;
                    Offer o;
                    o.provider = "runpod";
                    o.instance_type = type_name(count, short_name(acc->name, mem), cloud);
                    o.accelerator = acc->name;
                    o.accelerator_count = count;
                    o.gpu_memory_gb = mem;
                    o.on_demand_price = *price * count;
                    if (spot && *spot > 0) o.spot_price = *spot * count;
                    o.spot_available = o.spot_price.has_value();
                    o.prices_date = today;
                    // RunPod places a pod on a machine with at least what is asked: the request's
                    // minimums (sent with the deploy), else the catalog's typical figures.
                    for (const auto& c : catalog.offers("runpod"))
                        if (c.instance_type == o.instance_type) {
                            o.vcpus = c.vcpus;
                            o.memory_gb = c.memory_gb;
                        }
                    if (req.cpu) o.vcpus = std::max(o.vcpus, *req.cpu);
                    if (req.memory)
                        o.memory_gb = std::max(o.memory_gb, parse_memory_gb(*req.memory));
                    auto& ids = gpu_ids_[o.instance_type];
                    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
                    auto it = best.find(o.instance_type);
                    if (it == best.end() || o.on_demand_price < it->second.on_demand_price)
                        best[o.instance_type] = o;
                }
            }
        }
        std::vector<Offer> out;
        for (auto& [t, o] : best) out.push_back(std::move(o));
        return out;
    }

    std::string launch(const LaunchRequest& r) override {
        auto shape = parse_type(r.offer.instance_type);
        if (!shape)
            throw UnknownInstanceTypeError("RunPod: not a RunPod offer: " + r.offer.instance_type);
        std::vector<std::string> ids;
        {
            std::lock_guard lk(m_);
            if (auto it = gpu_ids_.find(r.offer.instance_type); it != gpu_ids_.end())
                ids = it->second;
        }
        if (ids.empty()) ids = known_gpu_ids(shape->gpu);
        if (ids.empty())
            throw UnknownInstanceTypeError("RunPod: no GPU type id known for " +
                                           r.offer.instance_type);
        const std::string start = container_boot_script(r.boot_script, r.ssh_public_key);
        std::string last;
        bool capacity = false;  // some GPU id exists but had none: a capacity answer
        for (const auto& gpu_id : ids) {
            json input = {{"name", fmt::format("{}-n{}", r.name, r.node)},
                          {"imageName", image_},
                          {"cloudType", shape->cloud == "COMMUNITY" ? "COMMUNITY" : "SECURE"},
                          {"gpuTypeId", gpu_id},
                          {"gpuCount", shape->count},
                          {"containerDiskInGb", 40},
                          {"volumeInGb", 0},
                          {"ports", "22/tcp"},
                          {"startSsh", true},
                          {"supportPublicIp", true},
                          {"dockerArgs", container_start_command("SKY_START")},
                          {"env", json::array({{{"key", "SKY_START"}, {"value", start}},
                                               {{"key", "PUBLIC_KEY"}, {"value", r.ssh_public_key}},
                                               {{"key", "SKY_POOL"}, {"value", r.pool_id}}})}};
            if (r.offer.vcpus > 0) input["minVcpuCount"] = r.offer.vcpus;
            if (r.offer.memory_gb > 0)
                input["minMemoryInGb"] = static_cast<int>(std::floor(r.offer.memory_gb));
            std::string mutation;
            const char* field = nullptr;
            if (r.spot) {
                // The bid per GPU: the offer's spot price as gpuTypes quoted it.
                input["bidPerGpu"] =
                    std::ceil(r.offer.hourly_price(true) / shape->count * 1000.0) / 1000.0;
                field = "podRentInterruptable";
                mutation =
                    "mutation Rent($input: PodRentInterruptableInput!) { "
                    "podRentInterruptable(input: $input) { id desiredStatus imageName machineId } "
                    "}";
            } else {
                field = "podFindAndDeployOnDemand";
                mutation =
                    "mutation Deploy($input: PodFindAndDeployOnDemandInput!) { "
                    "podFindAndDeployOnDemand(input: $input) { id desiredStatus imageName "
                    "machineId } }";
            }
            json answer;
            try {
                answer = graphql_raw(mutation, json{{"input", input}}, Repeat::once);
            } catch (const HttpError& e) {
                // No answer, one cut short, or a server error: the pod may have been deployed.
                if (e.outcome_unknown())
                    throw LaunchAnswerLostError("RunPod " + std::string(field) + ": " +
                                                error_of(e));
                rest::throw_provision_error(
                    "RunPod " + std::string(field) + " failed: " + error_of(e), e);
            } catch (const Error& e) {  // a 2xx whose body is not JSON
                throw LaunchAnswerLostError("RunPod " + std::string(field) + ": " + e.what());
            }
            const json data = answer.value("data", json());
            if (data.is_object() && data.contains(field) && data[field].is_object()) {
                std::string id = text_of(data[field], "id");
                if (!id.empty()) return id;
            }
            const auto err = first_error(answer);
            if (!err)  // neither a pod nor an error: not the API's answer
                throw LaunchAnswerLostError("RunPod " + std::string(field) +
                                            " answered without a pod id or an error");
            last = err->message;
            if (is_capacity_message(err->message)) {
                capacity = true;
                continue;  // the next GPU id
            }
            if (is_unknown_gpu_message(err->message)) continue;  // the next GPU id
            throw ProvisionError(fmt::format("RunPod {} failed: {}", field, last));
        }
        if (!capacity) throw UnknownInstanceTypeError("RunPod: " + last);
        throw CapacityError("RunPod: " + last);
    }

    std::vector<CloudInstance> describe(const std::vector<std::string>& ids) override {
        std::vector<CloudInstance> out;
        for (const auto& id : ids) {
            json answer =
                graphql_raw(fmt::format("query Pod {{ pod(input: {{podId: {}}}) {{ {} }} }}",
                                        json(id).dump(), kPodFields),
                            std::nullopt, Repeat::safe);
            const json data = answer.value("data", json());
            CloudInstance c;
            if (data.is_object() && data.contains("pod") && data["pod"].is_object()) {
                c = instance_from(data["pod"]);
            } else {
                const auto err = first_error(answer);
                if (err && !is_not_found(err->message))
                    throw ProvisionError("RunPod pod query failed: " + err->message);
                c = rest::unknown_instance(id, "RunPod");
            }
            c.id = id;
            out.push_back(std::move(c));
        }
        return out;
    }

    void terminate(const std::vector<std::string>& ids) override {
        {
            std::lock_guard lk(m_);
            for (const auto& id : ids) terminated_.insert(id);
        }
        std::string failures;
        for (const auto& id : ids) {
            json answer = graphql_raw(
                fmt::format("mutation {{ podTerminate(input: {{podId: {}}}) }}", json(id).dump()),
                std::nullopt, Repeat::safe);
            if (auto err = first_error(answer); err && !is_not_found(err->message))
                failures += (failures.empty() ? "" : "; ") + id + ": " + err->message;
        }
        if (!failures.empty()) throw ProvisionError("RunPod podTerminate failed: " + failures);
    }

    std::vector<CloudInstance> list(std::string_view pool_id) override {
        // `env` too: the sweep takes a pod for sky's only when its SKY_POOL agrees with its name.
        json data =
            graphql(fmt::format("query Pods {{ myself {{ pods {{ {} env }} }} }}", kPodFields));
        std::vector<CloudInstance> out;
        if (!data.contains("myself") || !data["myself"].is_object() ||
            !data["myself"].contains("pods") || !data["myself"]["pods"].is_array())
            return out;
        for (const auto& p : data["myself"]["pods"]) {
            CloudInstance c = instance_from(p);
            if (!c.pool_id.empty() && !marked_for(p, c.pool_id)) c.pool_id.clear();
            if (c.state == CloudInstance::State::gone || c.pool_id.empty()) continue;
            if (!pool_id.empty() && c.pool_id != pool_id) continue;
            out.push_back(std::move(c));
        }
        return out;
    }

    CloudLogin login() const override {
        CloudLogin l;
        l.user = "root";
        l.power_off_on_expiry = false;  // a container: powering off ends nothing
        l.rotate_host_key = true;
        l.boot_wait = std::chrono::seconds(600);  // the image is pulled first
        // The boot script is the pod's SKY_START variable, readable through RunPod's API.
        l.launch_data_readable = true;
        return l;
    }

private:
    static bool is_not_found(const std::string& message) {
        const std::string m = to_lower(message);
        return m.find("not found") != std::string::npos ||
               m.find("does not exist") != std::string::npos;
    }

    static std::string error_of(const HttpError& e) {
        if (!e.provider_message().empty())
            return fmt::format("HTTP {} {}: {}", e.status(), e.code(), e.provider_message());
        return e.what();
    }

    // The whole answer ({"data", "errors"}); HTTP errors (400 validation, 401) throw HttpError.
    json graphql_raw(const std::string& query, const std::optional<json>& variables,
                     Repeat repeat) {
        json body = {{"query", query}};
        if (variables) body["variables"] = *variables;
        json answer = api_->call("POST", "/graphql", body, repeat);
        return answer.is_object() ? answer : json::object();
    }

    // `data` of a read; a GraphQL error is a ProvisionError with RunPod's message.
    json graphql(const std::string& query) {
        json answer;
        try {
            answer = graphql_raw(query, std::nullopt, Repeat::safe);
        } catch (const HttpError& e) {
            rest::throw_provision_error("RunPod GraphQL failed: " + error_of(e), e);
        }
        if (auto err = first_error(answer); err && !answer.contains("data"))
            throw ProvisionError("RunPod GraphQL failed: " + err->message);
        json data = answer.value("data", json::object());
        return data.is_object() ? data : json::object();
    }

    // sky names its pods sky-<pool>-n<node> and sets SKY_POOL=<pool> in their environment: a
    // pod that someone named like sky's (security review L5) lacks the second marker. RunPod
    // answers `env` as "KEY=value" strings; {key, value} objects are read too. A pod whose env
    // is not in the answer at all is judged by its name alone.
    static bool marked_for(const json& pod, const std::string& pool_id) {
        const auto it = pod.find("env");
        if (it == pod.end() || !it->is_array()) return true;
        for (const auto& e : *it) {
            if (e.is_string()) {
                const std::string kv = e.get<std::string>();
                if (kv.rfind("SKY_POOL=", 0) == 0) return kv.substr(9) == pool_id;
            } else if (e.is_object() && text_of(e, "key") == "SKY_POOL") {
                return text_of(e, "value") == pool_id;
            }
        }
        return false;
    }

    CloudInstance instance_from(const json& p) {
        CloudInstance c;
        c.id = text_of(p, "id");
        const std::string status = text_of(p, "desiredStatus");
        c.pool_id = rest::pool_of_machine_name(text_of(p, "name"));
        c.spot = text_of(p, "podType") == "INTERRUPTABLE";
        c.instance_type = text_of(p, "machineId");
        if (status == "RUNNING") {
            c.state = CloudInstance::State::pending;
            const json rt = p.value("runtime", json());
            if (rt.is_object() && rt.contains("ports") && rt["ports"].is_array())
                for (const auto& port : rt["ports"])
                    if (rest::port_of(port, "privatePort").value_or(0) == 22 &&
                        port.value("isIpPublic", false) && rest::port_of(port, "publicPort")) {
                        c.public_ip = text_of(port, "ip");
                        c.ssh_port = *rest::port_of(port, "publicPort");
                        c.state = CloudInstance::State::running;
                    }
        } else if (status == "CREATED" || status == "RESTARTING" || status.empty()) {
            c.state = CloudInstance::State::pending;
        } else if (status == "TERMINATED") {
            c.state = CloudInstance::State::gone;
        } else {
            c.state = CloudInstance::State::stopping;  // EXITED, DEAD
        }
        if (c.state == CloudInstance::State::stopping || c.state == CloudInstance::State::gone) {
            c.reason = "pod status " + status;
            std::lock_guard lk(m_);
            // An interruptible pod that stops without sky asking was taken back.
            if (c.spot && !terminated_.count(c.id)) {
                c.preempted = true;
                c.reason = "RunPod interrupted the pod (" + status + ")";
            }
        }
        return c;
    }

    std::unique_ptr<rest::JsonApi> api_;
    std::string cloud_type_;
    std::string image_;
    std::mutex m_;
    std::map<std::string, std::vector<std::string>> gpu_ids_;  // instance type -> GPU type ids
    std::set<std::string> terminated_;
};

}  // namespace

std::unique_ptr<CloudAdapter> make_runpod_adapter(const RunPod& config) {
    return std::make_unique<RunPodAdapter>(config);
}

ProviderDescriptor runpod_provider() {
    // RunPod's API host: GraphQL at /graphql (REST v1 at rest.runpod.io is switched off).
    return rest::cloud_descriptor<RunPod>(
        {"runpod", "RunPod", "sky::RunPod", "GPU pods"},
        ProviderFacts{
            .exposure = [](const PoolSpec&) { return rest::container_exposure("RunPod"); },
            // "Credits are charged every minute the Pod is running" (some sources say per second:
            // per minute is the conservative reading).
            .billing = BillingPolicy{.increment = std::chrono::seconds(60),
                                     .minimum = std::chrono::seconds(60)},
            .runs_on_this_machine = false,
        },
        make_runpod_adapter,
        [](const RunPod& c, std::vector<std::string>& problems) {
            const std::string t = to_upper(c.cloud_type);
            if (t != "SECURE" && t != "COMMUNITY" && t != "ALL")
                problems.push_back(fmt::format(
                    "provider: sky::RunPod cloud_type must be \"SECURE\", \"COMMUNITY\" or "
                    "\"ALL\", got \"{}\"",
                    c.cloud_type));
        },
        rest::env_credentials({"RUNPOD_API_KEY"}, "RUNPOD_API_BASE_URL", "https://api.runpod.io"));
}

}  // namespace sky::detail
