// sky::VastAI as a cloud adapter over Vast.ai's REST API v0 (vast-ai/vast-python vast.py,
// vast-ai/vast-cli): POST /bundles/ for offers (on-demand or bid, with the pool's GPU, count,
// reliability, CPU and memory as filters), POST /ssh/ for the pool's key, PUT /asks/{id}/ to rent
// an ask with the boot script as onstart, GET /instances/{id}/?owner=me for its state and the
// direct SSH port, DELETE /instances/{id}/, GET /instances/?owner=me for the sweep by label.
#include "providers/vastai/vastai.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include "catalog/names.hpp"
#include "providers/rest/container_boot.hpp"
#include "providers/rest/descriptor.hpp"
#include "providers/rest/json_api.hpp"
#include "providers/vastai/provider.hpp"
#include "util/env.hpp"
#include "util/file.hpp"
#include "util/text.hpp"

namespace sky::detail {

namespace {

using nlohmann::json;
using rest::error_text;
using rest::number_of;
using rest::Repeat;
using rest::text_of;

constexpr std::size_t kOnstartLimit = 4048;

std::optional<ProviderErrorInfo> parse_vast_error(const HttpResponse& r) {
    json j = json::parse(r.body);
    if (!j.is_object()) return std::nullopt;
    std::string code = text_of(j, "error"), message = text_of(j, "msg");
    if (message.empty()) message = text_of(j, "detail");
    if (message.empty()) message = text_of(j, "message");
    if (code.empty() && message.empty()) return std::nullopt;
    return ProviderErrorInfo{code, message};
}

// The marketplace's names for a model (gpu_name), as Vast.ai spells them.
std::vector<std::string> vast_gpu_names(const std::string& accelerator) {
    static const std::map<std::string, std::vector<std::string>> names = {
        {"H100", {"H100 SXM", "H100 PCIE", "H100 NVL"}},
        {"H200", {"H200", "H200 NVL"}},
        {"B200", {"B200"}},
        {"A100", {"A100 SXM4", "A100 PCIE", "A100X"}},
        {"A10", {"A10"}},
        {"A40", {"A40"}},
        {"L40S", {"L40S"}},
        {"L40", {"L40"}},
        {"L4", {"L4"}},
        {"V100", {"Tesla V100"}},
        {"T4", {"Tesla T4"}},
        {"RTX4090", {"RTX 4090"}},
        {"RTX3090", {"RTX 3090"}},
        {"RTX5090", {"RTX 5090"}},
        {"RTXA6000", {"RTX A6000"}},
        {"RTX6000-Ada", {"RTX 6000Ada"}},
    };
    auto it = names.find(accelerator);
    return it == names.end() ? std::vector<std::string>{} : it->second;
}

// "1x-RTX4090": count and canonical model, as the embedded catalog names Vast.ai offers.
std::string type_name(int count, const std::string& accelerator) {
    return fmt::format("{}x-{}", count, accelerator);
}

std::optional<std::pair<int, std::string>> parse_type(const std::string& type) {
    auto x = type.find("x-");
    if (x == std::string::npos || x == 0) return std::nullopt;
    try {
        return std::pair{std::stoi(type.substr(0, x)), type.substr(x + 2)};
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

std::optional<std::string> read_key_file() {
    const std::string home = env_or("HOME");
    if (home.empty()) return std::nullopt;
    const auto text = read_file(std::filesystem::path(home) / ".vast_api_key");
    if (!text) return std::nullopt;
    std::string k(trim(*text));
    if (k.empty()) return std::nullopt;
    return k;
}

class VastAdapter final : public CloudAdapter {
public:
    explicit VastAdapter(const VastAI& cfg) : min_reliability_(cfg.min_reliability) {
        std::string key = env_or("VAST_API_KEY");
        if (key.empty())
            if (auto f = read_key_file()) key = *f;
        if (key.empty())
            throw ConfigError(
                "Vast.ai: no credentials: set VAST_API_KEY or write the key to ~/.vast_api_key "
                "(as `vastai set api-key` does)");
        api_ = std::make_unique<rest::JsonApi>(
            rest::bearer_config("Vast.ai",
                                rest::choose_endpoint(cfg.endpoint, "VastAI{.endpoint}",
                                                      "VAST_API_URL", kVastDefaultUrl),
                                key, parse_vast_error));
        image_ = env_or("SKY_VASTAI_IMAGE", "nvidia/cuda:12.8.0-runtime-ubuntu24.04");
    }

    std::string name() const override { return "vastai"; }

    std::vector<Offer> live_offers(const Catalog&, const SelectionRequest& req,
                                   const std::function<void(Event)>& emit) override {
        api_->notice_endpoint("API key");
        std::vector<json> asks;
        const bool bid = wants_spot(req.spot);
        try {
            asks = search(
                req.accelerator ? std::optional<std::string>(req.accelerator->name) : std::nullopt,
                req.accelerator ? req.accelerator->count : 1, false, req, bid, 200);
        } catch (const std::exception& e) {
            emit(ErrorEvent{"Vast.ai: offers unavailable, using the catalog's: " + error_text(e),
                            std::nullopt});
            return {};
        }
        if (asks.empty())
            // The marketplace answered, and no ask matches: the catalog's types would be searched
            // for again at launch, in the marketplace's stead.
            throw CapacityError(fmt::format("Vast.ai: no rentable {}ask matches {} now",
                                            bid ? "interruptible " : "",
                                            req.accelerator ? req.accelerator->name : "the pool"));
        // One offer per model and count: the cheapest ask's facts and prices (the ask itself is
        // chosen again at launch, as the marketplace moves).
        std::map<std::string, Offer> best;
        const std::string today = rest::today_utc();
        for (const auto& a : asks) {
            auto o = offer_of(a, today);
            if (!o) continue;
            auto it = best.find(o->instance_type);
            if (it == best.end() || o->hourly_price(bid) < it->second.hourly_price(bid))
                best[o->instance_type] = *o;
        }
        std::vector<Offer> out;
        for (auto& [t, o] : best) out.push_back(std::move(o));
        return out;
    }

    void create_infra(const InfraRequest& r, const std::function<void(Event)>&) override {
        std::lock_guard lk(m_);
        public_key_ = r.ssh_public_key;  // pool_keys() knows the pool's key by it
        // A registration whose answer was lost (none came, it was cut short or not JSON, or a
        // server error) may have been carried out: the key is then among the account's.
        auto registered_anyway = [&] {
            try {
                const auto ids = pool_keys(r.pool_id);
                if (ids.empty()) return false;
                key_id_ = ids.front();
                return true;
            } catch (const std::exception&) {
                return false;
            }
        };
        if (!key_registered_) {
            try {
                json k =
                    api_->call("POST", "/ssh/", json{{"ssh_key", r.ssh_public_key}}, Repeat::once);
                if (k.is_object() && k.contains("key") && k["key"].is_object())
                    key_id_ = text_of(k["key"], "id");
                if (key_id_.empty()) key_id_ = text_of(k, "id");
                key_registered_ = true;
            } catch (const HttpError& e) {
                if (!e.outcome_unknown() || !registered_anyway())
                    rest::throw_provision_error(
                        "Vast.ai: registering the pool's SSH key failed: " + error_text(e), e);
                key_registered_ = true;
            } catch (const std::exception& e) {
                if (!registered_anyway())
                    throw ProvisionError("Vast.ai: registering the pool's SSH key failed: " +
                                         error_text(e));
                key_registered_ = true;
            }
        }
    }

    std::string launch(const LaunchRequest& r) override {
        auto shape = parse_type(r.offer.instance_type);
        if (!shape)
            throw UnknownInstanceTypeError("Vast.ai: not a Vast.ai offer: " +
                                           r.offer.instance_type);
        const std::string onstart = vastai_onstart(r.boot_script, r.ssh_public_key);
        SelectionRequest req;
        std::vector<json> asks;
        try {
            asks = search(shape->second, shape->first, true, req, r.spot, 10);
        } catch (const std::exception& e) {
            rest::throw_provision_error("Vast.ai: searching offers failed: " + error_text(e), e);
        }
        std::string last = "no offer of " + r.offer.instance_type + " is rentable now";
        for (std::size_t i = 0; i < asks.size() && i < 5; ++i) {
            const json& a = asks[i];
            const std::string ask = text_of(a, "id");
            json body = {{"client_id", "me"},  {"image", image_},
                         {"disk", 32},         {"label", fmt::format("{}-n{}", r.name, r.node)},
                         {"onstart", onstart}, {"runtype", "ssh_direc ssh_proxy"}};
            if (r.spot) {
                // A bid a little over the ask's minimum, as the CLI's default does.
                const double min_bid = number_of(a, "min_bid").value_or(0.001);
                body["price"] = std::clamp(std::ceil(min_bid * 1.2 * 1000) / 1000, 0.001, 128.0);
            }
            json answer;
            try {
                answer = api_->call("PUT", "/asks/" + url_encode(ask) + "/", body, Repeat::once);
            } catch (const HttpError& e) {
                // 410: the ask was taken meanwhile; 404: it is gone. Try the next one.
                if (e.status() == 410 || e.status() == 404) {
                    last = fmt::format("ask {}: {}", ask, error_text(e));
                    continue;
                }
                // No answer, one cut short, or a server error: the ask may have been rented.
                if (e.outcome_unknown())
                    throw LaunchAnswerLostError("Vast.ai: PUT /asks: " + error_text(e));
                rest::throw_provision_error("Vast.ai: PUT /asks failed: " + error_text(e), e);
            } catch (const Error& e) {  // a 2xx whose body is not JSON
                throw LaunchAnswerLostError(std::string("Vast.ai: ") + e.what());
            }
            const std::string id = text_of(answer, "new_contract");
            if (!id.empty()) return id;
            if (answer.is_object() && answer.contains("success") && answer["success"] == false)
                throw ProvisionError("Vast.ai: PUT /asks refused: " + text_of(answer, "msg"));
            throw LaunchAnswerLostError("Vast.ai: PUT /asks answered without new_contract");
        }
        throw CapacityError("Vast.ai: " + last);
    }

    std::vector<CloudInstance> describe(const std::vector<std::string>& ids) override {
        std::vector<CloudInstance> out;
        for (const auto& id : ids) {
            CloudInstance c;
            try {
                json r = api_->call("GET", "/instances/" + url_encode(id) + "/?owner=me");
                const json inst = r.is_object() ? r.value("instances", json()) : json();
                if (inst.is_object() && !inst.empty()) {
                    c = instance_from(inst);
                } else {
                    c = rest::unknown_instance(id, "Vast.ai");
                }
            } catch (const HttpError& e) {
                if (e.status() != 404) throw;
                c = rest::unknown_instance(id, "Vast.ai");
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
            try {
                (void)api_->send("DELETE", "/instances/" + url_encode(id) + "/", json::object());
            } catch (const HttpError& e) {
                if (e.status() == 404) continue;
                failures += (failures.empty() ? "" : "; ") + id + ": " + error_text(e);
            }
        }
        if (!failures.empty())
            throw ProvisionError("Vast.ai: destroying instances failed: " + failures);
    }

    std::vector<CloudInstance> list(std::string_view pool_id) override {
        std::vector<CloudInstance> out;
        json r = api_->call("GET", "/instances/?owner=me");
        if (!r.is_object() || !r.contains("instances") || !r["instances"].is_array()) return out;
        for (const auto& i : r["instances"]) {
            CloudInstance c = instance_from(i);
            if (c.state == CloudInstance::State::gone || c.pool_id.empty()) continue;
            if (!pool_id.empty() && c.pool_id != pool_id) continue;
            out.push_back(std::move(c));
        }
        return out;
    }

    void delete_infra(std::string_view pool_id) noexcept override {
        std::lock_guard lk(m_);
        try {
            std::vector<std::string> ids;
            if (!key_id_.empty()) ids.push_back(key_id_);
            for (const auto& id : pool_keys(pool_id))
                if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
            for (const auto& id : ids) {
                try {
                    (void)api_->send("DELETE", "/ssh/" + url_encode(id) + "/");
                } catch (const HttpError& e) {
                    if (e.status() != 404) continue;
                }
                if (id == key_id_) key_id_.clear();
            }
            key_registered_ = !key_id_.empty();
        } catch (...) {
        }
    }

    std::vector<std::string> infra_left(std::string_view pool_id) noexcept override {
        std::lock_guard lk(m_);
        std::vector<std::string> left;
        try {
            for (const auto& id : pool_keys(pool_id))
                left.push_back(fmt::format("SSH key {} (sky-{})", id, pool_id));
        } catch (const std::exception& e) {
            left.push_back(
                fmt::format("SSH key of sky-{} (cannot tell: {})", pool_id, error_text(e)));
        } catch (...) {
        }
        return left;
    }

    CloudLogin login() const override {
        CloudLogin l;
        l.user = "root";
        l.power_off_on_expiry = false;  // a container: powering off ends nothing
        l.rotate_host_key = true;
        l.boot_wait = std::chrono::seconds(600);  // the image is pulled first
        l.infra_wait = std::chrono::seconds(30);  // a key is never held by an instance
        // The boot script is the instance's onstart, readable through Vast.ai's API.
        l.launch_data_readable = true;
        return l;
    }

private:
    // The account keys that are this pool's: the one this adapter registered, or any whose
    // comment is the pool's name (the cloud layer comments its key "sky-<pool id>", so `sky gc`
    // finds it from the pool id alone). Caller holds m_; throws what the call throws.
    std::vector<std::string> pool_keys(std::string_view pool_id) {
        json keys = api_->call("GET", "/ssh/");
        const json& list =
            keys.is_array() ? keys : keys.value("keys", keys.value("ssh_keys", json::array()));
        const std::string comment = "sky-" + std::string(pool_id);
        std::vector<std::string> ids;
        for (const auto& k : list) {
            std::string text = text_of(k, "public_key");
            if (text.empty()) text = text_of(k, "ssh_key");
            const std::string t(trim(text));
            const bool ours =
                (!public_key_.empty() && t == trim(public_key_)) ||
                (t.size() > comment.size() + 1 &&
                 t.compare(t.size() - comment.size() - 1, std::string::npos, " " + comment) == 0);
            if (ours) ids.push_back(text_of(k, "id"));
        }
        return ids;
    }

    // Asks that meet the request, cheapest first (by min_bid for bids).
    std::vector<json> search(const std::optional<std::string>& accelerator, int count, bool exact,
                             const SelectionRequest& req, bool bid, int limit) {
        json q = {{"verified", {{"eq", true}}},
                  {"external", {{"eq", false}}},
                  {"rentable", {{"eq", true}}},
                  {"rented", {{"eq", false}}},
                  {"reliability2", {{"gte", min_reliability_}}},
                  {"direct_port_count", {{"gte", 1}}},
                  {"num_gpus", {{exact ? "eq" : "gte", std::max(1, count)}}},
                  {"order", json::array({json::array({bid ? "min_bid" : "dph_total", "asc"})})},
                  {"type", bid ? "bid" : "on-demand"},
                  {"limit", limit}};
        if (accelerator) {
            auto names = vast_gpu_names(*accelerator);
            if (!names.empty()) q["gpu_name"] = {{"in", names}};
        }
        if (req.cpu) q["cpu_cores_effective"] = {{"gte", *req.cpu}};
        if (req.memory) {
            q["cpu_ram"] = {{"gte", parse_memory_gb(*req.memory) * 1000}};  // MB
        }
        json r = api_->call("POST", "/bundles/", q);
        std::vector<json> out;
        if (r.is_object() && r.contains("offers") && r["offers"].is_array())
            for (const auto& o : r["offers"]) out.push_back(o);
        if (accelerator)  // a model the table does not name: keep its own offers only
            std::erase_if(out, [&](const json& o) {
                auto acc = accelerator_from_device_name(text_of(o, "gpu_name"), 0, 1);
                return !acc || acc->name != *accelerator;
            });
        return out;
    }

    static std::optional<Offer> offer_of(const json& a, const std::string& today) {
        const int gpus = rest::int_of(a, "num_gpus", 0, 1 << 16).value_or(0);
        const double gpu_mb = number_of(a, "gpu_ram").value_or(0);
        auto acc = accelerator_from_device_name(text_of(a, "gpu_name"), gpu_mb * 1.0, gpus);
        auto price = number_of(a, "dph_total");
        if (!acc || gpus < 1 || !price) return std::nullopt;
        Offer o;
        o.provider = "vastai";
        o.instance_type = type_name(gpus, acc->name);
        o.accelerator = acc->name;
        o.accelerator_count = gpus;
        o.gpu_memory_gb = std::round(gpu_mb / 1000.0);  // MB, as the API counts them
        if (acc->memory) o.gpu_memory_gb = parse_memory_gb(*acc->memory);
        o.vcpus = rest::int_of(a, "cpu_cores_effective", 0, 1 << 20).value_or(0);
        o.memory_gb = number_of(a, "cpu_ram").value_or(0) / 1024.0;
        o.on_demand_price = *price;
        if (auto b = number_of(a, "min_bid"); b && *b > 0) o.spot_price = *b;
        o.spot_available = o.spot_price.has_value();
        o.prices_date = today;
        return o;
    }

    CloudInstance instance_from(const json& i) {
        CloudInstance c;
        c.id = text_of(i, "id");
        const std::string actual = text_of(i, "actual_status");
        const std::string intended = text_of(i, "intended_status");
        if (actual == "running")
            c.state = CloudInstance::State::running;
        else if (actual.empty() || actual == "loading" || actual == "created" ||
                 actual == "rebooting" || actual == "scheduling")
            c.state = intended == "stopped" ? CloudInstance::State::stopping
                                            : CloudInstance::State::pending;
        else
            c.state = CloudInstance::State::stopping;  // exited, stopped, offline, unknown, frozen
        c.spot = i.value("is_bid", false);
        c.pool_id = rest::pool_of_machine_name(text_of(i, "label"));
        c.instance_type = type_name(rest::int_of(i, "num_gpus", 0, 1 << 16).value_or(0), [&] {
            auto a = accelerator_from_device_name(text_of(i, "gpu_name"), 0, 1);
            return a ? a->name : text_of(i, "gpu_name");
        }());
        // Direct SSH: the public address and the host port mapped to the container's 22.
        const std::string ip = text_of(i, "public_ipaddr");
        int port = 0;
        if (i.contains("ports") && i["ports"].is_object() && i["ports"].contains("22/tcp") &&
            i["ports"]["22/tcp"].is_array() && !i["ports"]["22/tcp"].empty())
            port = rest::port_of(i["ports"]["22/tcp"][0], "HostPort").value_or(0);
        if (!ip.empty() && port > 0) {
            c.public_ip = ip;
            c.ssh_port = port;
        } else if (!text_of(i, "ssh_host").empty() && rest::port_of(i, "ssh_port")) {
            c.public_ip = text_of(i, "ssh_host");  // Vast.ai's SSH proxy
            c.ssh_port = *rest::port_of(i, "ssh_port");
        }
        if (c.state == CloudInstance::State::running && c.public_ip.empty())
            c.state = CloudInstance::State::pending;  // no SSH endpoint yet
        if (c.state == CloudInstance::State::stopping) {
            c.reason = "instance status " + (actual.empty() ? intended : actual);
            if (auto m = text_of(i, "status_msg"); !m.empty()) c.reason += ": " + m;
            std::lock_guard lk(m_);
            // A bid instance that stops without sky asking was outbid.
            if (c.spot && !terminated_.count(c.id)) {
                c.preempted = true;
                c.reason = "Vast.ai stopped the bid instance (" + c.reason + ")";
            }
        }
        return c;
    }

    std::unique_ptr<rest::JsonApi> api_;
    double min_reliability_;
    std::string image_;
    std::mutex m_;
    bool key_registered_ = false;
    std::string key_id_, public_key_;
    std::set<std::string> terminated_;
};

}  // namespace

std::string vastai_onstart(const std::string& boot_script, const std::string& authorized_key) {
    std::string s = container_boot_script(boot_script, authorized_key);
    if (s.size() > kOnstartLimit)
        throw ProvisionError(fmt::format(
            "Vast.ai: the node's onstart script is {} characters, over Vast.ai's limit of {}",
            s.size(), kOnstartLimit));
    return s;
}

std::unique_ptr<CloudAdapter> make_vastai_adapter(const VastAI& config) {
    return std::make_unique<VastAdapter>(config);
}

ProviderDescriptor vastai_provider() {
    return rest::cloud_descriptor<VastAI>(
        {"vastai", "Vast.ai", "sky::VastAI", "GPU machines"},
        ProviderFacts{
            .exposure = [](const PoolSpec&) { return rest::container_exposure("Vast.ai"); },
            .billing = BillingPolicy{},  // per second, no minimum
            .runs_on_this_machine = false,
        },
        make_vastai_adapter,
        [](const VastAI& v, std::vector<std::string>& problems) {
            if (!(v.min_reliability >= 0 && v.min_reliability <= 1))
                problems.push_back(
                    fmt::format("provider: sky::VastAI min_reliability must be in [0, 1], got {}",
                                v.min_reliability));
        },
        rest::env_credentials({"VAST_API_KEY"}, "VAST_API_URL", "https://console.vast.ai/api/v0",
                              ".vast_api_key"));
}

}  // namespace sky::detail
