// sky::Verda as a cloud adapter over Verda's API v1 (verda-cloud/sdk-python, formerly
// DataCrunch-io/datacrunch-python): POST /oauth2/token (JSON, client credentials; refresh token
// on 401), GET /instance-types and /instance-availability for offers, /sshkeys for the pool's key,
// POST /scripts for each node's boot script, POST /instances (the id comes back as text),
// GET /instances[/{id}], PUT /instances {action: delete}. The pool's life is the cloud layer's.
#include "providers/verda/verda.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>

#include "catalog/names.hpp"
#include "http/client_address.hpp"
#include "http/endpoint.hpp"
#include "providers/cloud/host_firewall.hpp"
#include "providers/rest/descriptor.hpp"
#include "providers/rest/json_api.hpp"
#include "providers/verda/provider.hpp"
#include "util/env.hpp"
#include "util/text.hpp"

namespace sky::detail {

namespace {

using nlohmann::json;
using rest::error_text;
using rest::number_of;
using rest::Repeat;
using rest::text_of;
using Clock = std::chrono::steady_clock;

constexpr const char* kProvider = "Verda";

std::optional<ProviderErrorInfo> parse_verda_error(const HttpResponse& r) {
    json j = json::parse(r.body);
    if (!j.is_object()) return std::nullopt;
    std::string code = text_of(j, "code"), message = text_of(j, "message");
    if (code.empty() && message.empty()) {
        // OAuth2 errors (RFC 6749 §5.2) on the token endpoint.
        code = text_of(j, "error");
        message = text_of(j, "error_description");
    }
    if (code.empty() && message.empty()) return std::nullopt;
    return ProviderErrorInfo{code, message};
}

bool is_not_found(const HttpError& e) { return e.status() == 404 || e.code() == "not_found"; }

// Verda's answers that mean "no such type" (a retired or renamed type, one this account may not
// order): the next offer, never the same type again.
bool is_unknown_type(const HttpError& e) {
    if (e.status() != 400 && e.status() != 404 && e.status() != 422) return false;
    const std::string m = to_lower(e.provider_message());
    if (m.find("instance type") == std::string::npos &&
        m.find("instance_type") == std::string::npos)
        return false;
    for (const char* w : {"invalid", "unknown", "not found", "does not exist", "not supported"})
        if (m.find(w) != std::string::npos) return true;
    return false;
}

// Verda's answers that mean "not this type here, now".
bool is_capacity(const HttpError& e) {
    if (e.code() == "insufficient_resources" || e.code() == "no_capacity" ||
        e.code() == "out_of_stock")
        return true;
    if (e.status() != 400 && e.status() != 409 && e.status() != 422 && e.status() != 503)
        return false;
    const std::string m = to_lower(e.provider_message());
    for (const char* w : {"not available", "no capacity", "not enough capacity", "out of stock",
                          "sold out", "no available", "unavailable"})
        if (m.find(w) != std::string::npos) return true;
    return false;
}

std::string blob_of(const std::string& public_key) {
    std::string t(trim(public_key));
    auto a = t.find(' ');
    if (a == std::string::npos) return t;
    auto b = t.find(' ', a + 1);
    return t.substr(a + 1, b == std::string::npos ? std::string::npos : b - a - 1);
}

// The id in a body that is the id as text (the SDK reads `.text`): quoted or not. "" when the
// body holds no id (an error page, a cut answer): never an id made of whatever came back.
std::string id_of_text(const std::string& body) {
    auto plausible = [](const std::string& id) {
        return !id.empty() && id.size() <= 128 &&
               std::all_of(id.begin(), id.end(),
                           [](unsigned char c) { return std::isalnum(c) || c == '-' || c == '_'; });
    };
    std::string t(trim(body));
    if (t.size() >= 2 && t.front() == '"' && t.back() == '"') {
        try {
            const std::string id = json::parse(t).get<std::string>();
            return plausible(id) ? id : std::string();
        } catch (const std::exception&) {
        }
    }
    if (!t.empty() && t.front() == '{') {
        try {
            const std::string id = text_of(json::parse(t), "id");
            return plausible(id) ? id : std::string();
        } catch (const std::exception&) {
        }
    }
    return plausible(t) ? t : std::string();
}

// "sky:pool=<id>" in the instance's description names its pool.
constexpr std::string_view kDescriptionPrefix = "sky:pool=";

struct Credentials {
    std::string id, secret, source;
};

std::optional<Credentials> credentials_from_env() {
    for (auto [id, secret] : {std::pair{"VERDA_CLIENT_ID", "VERDA_CLIENT_SECRET"},
                              std::pair{"DATACRUNCH_CLIENT_ID", "DATACRUNCH_CLIENT_SECRET"}}) {
        std::string i = env_or(id), s = env_or(secret);
        if (!i.empty() && !s.empty()) return Credentials{i, s, std::string(id)};
    }
    return std::nullopt;
}

class VerdaAdapter final : public CloudAdapter {
public:
    explicit VerdaAdapter(const Verda& cfg) : region_(cfg.region) {
        auto creds = credentials_from_env();
        if (!creds)
            throw ConfigError(
                "Verda: no credentials: set VERDA_CLIENT_ID and VERDA_CLIENT_SECRET (or "
                "DATACRUNCH_CLIENT_ID and DATACRUNCH_CLIENT_SECRET) to an API client's "
                "credentials");
        creds_ = *creds;
        rest::ApiConfig c;
        c.provider = kProvider;
        c.endpoint = rest::choose_endpoint(cfg.endpoint, "Verda{.endpoint}", "VERDA_API_URL",
                                           kVerdaDefaultUrl);
        c.secrets = {creds_.secret};
        // The tokens Verda hands out are as secret as the client secret: masked everywhere, and
        // the token endpoint's answers (which hold them) are never quoted.
        c.later_secrets = [this] {
            std::lock_guard lk(issued_m_);
            return issued_;
        };
        c.parse_error = parse_verda_error;
        rest::ApiConfig token_config = c;
        token_config.quote_bodies = false;
        token_api_ = std::make_unique<rest::JsonApi>(token_config);  // no bearer there
        c.authorize = [this](HttpRequest& r) {
            r.set_header("Authorization", "Bearer " + access_token());
        };
        api_ = std::make_unique<rest::JsonApi>(std::move(c));
        image_ = env_or("SKY_VERDA_IMAGE", "ubuntu-24.04-cuda-12.8-open-docker");
    }

    std::string name() const override { return "verda"; }
    std::string region() const override { return region_; }

    std::vector<Offer> live_offers(const Catalog& catalog, const SelectionRequest& req,
                                   const std::function<void(Event)>& emit) override {
        api_->notice_endpoint("client credentials");
        json types;
        try {
            types = call("GET", "/instance-types");
        } catch (const std::exception& e) {
            emit(ErrorEvent{
                "Verda: instance types unavailable, using the catalog's offers: " + error_text(e),
                std::nullopt});
            return {};
        }
        // Where each type can be had now, on demand and as spot.
        auto where = [&](bool spot) {
            std::map<std::string, std::set<std::string>> at;  // type -> locations
            json a = call("GET",
                          fmt::format("/instance-availability?isSpot={}", spot ? "true" : "false"));
            if (a.is_array())
                for (const auto& loc : a)
                    if (loc.contains("availabilities") && loc["availabilities"].is_array())
                        for (const auto& t : loc["availabilities"])
                            if (t.is_string())
                                at[t.get<std::string>()].insert(text_of(loc, "location_code"));
            return at;
        };
        std::map<std::string, std::set<std::string>> on_demand, spot;
        bool known = true;
        try {
            on_demand = where(false);
            if (wants_spot(req.spot) || on_demand_fallback(req.spot)) spot = where(true);
        } catch (const std::exception& e) {
            known = false;
            emit(ErrorEvent{"Verda: availability unknown, offering " +
                                (region_.empty() ? std::string("FIN-01") : region_) + ": " +
                                error_text(e),
                            std::nullopt});
        }
        const std::string today = rest::today_utc();
        std::vector<Offer> out;
        if (!types.is_array()) return out;
        auto available = [&](const json& t) {
            const std::string type = text_of(t, "instance_type");
            return on_demand.count(type) > 0 || spot.count(type) > 0;
        };
        if (known && !types.empty() && std::none_of(types.begin(), types.end(), available))
            // Verda answered, and nothing is available: its catalog would name types it never
            // listed (live offers win on this path too).
            throw CapacityError(fmt::format(
                "Verda: none of the {} instance types it lists is available now, on demand{}, in "
                "any location (GET /instance-availability)",
                types.size(),
                wants_spot(req.spot) || on_demand_fallback(req.spot) ? " or spot" : ""));
        for (const auto& t : types) {
            Offer o;
            o.provider = "verda";
            o.instance_type = text_of(t, "instance_type");
            auto price = number_of(t, "price_per_hour");
            if (o.instance_type.empty() || !price) continue;
            o.on_demand_price = *price;
            if (auto s = number_of(t, "spot_price"); s && *s > 0) o.spot_price = *s;
            o.prices_date = today;
            if (t.contains("cpu"))
                o.vcpus = rest::int_of(t["cpu"], "number_of_cores", 0, 1 << 20).value_or(0);
            if (t.contains("memory"))
                o.memory_gb = number_of(t["memory"], "size_in_gigabytes").value_or(0);
            int gpus = 0;
            if (t.contains("gpu"))
                gpus = rest::int_of(t["gpu"], "number_of_gpus", 0, 1 << 16).value_or(0);
            if (gpus > 0) {
                double per_gpu_gb = 0;
                if (t.contains("gpu_memory"))
                    per_gpu_gb = number_of(t["gpu_memory"], "size_in_gigabytes").value_or(0) / gpus;
                std::string desc = t.contains("gpu") ? text_of(t["gpu"], "description") : "";
                std::optional<Accelerator> acc =
                    accelerator_from_device_name(desc, per_gpu_gb * 1024.0, gpus);
                if (!acc)
                    acc = accelerator_from_device_name(text_of(t, "model"), per_gpu_gb * 1024.0,
                                                       gpus);
                if (!acc)
                    for (const auto& c : catalog.offers("verda"))
                        if (c.instance_type == o.instance_type && !c.accelerator.empty()) {
                            acc = Accelerator{};
                            acc->name = c.accelerator;
                        }
                if (!acc) continue;  // a GPU sky cannot name
                o.accelerator = acc->name;
                o.accelerator_count = gpus;
                o.gpu_memory_gb = per_gpu_gb;
            }
            std::set<std::string> locations;
            if (known) {
                locations = on_demand[o.instance_type];
                for (const auto& l : spot[o.instance_type]) locations.insert(l);
            } else {
                locations.insert(region_.empty() ? "FIN-01" : region_);
            }
            for (const auto& l : locations) {
                Offer at = o;
                at.region = l;
                at.spot_available =
                    o.spot_price.has_value() && (!known || spot[o.instance_type].count(l) > 0);
                if (!at.spot_available) at.spot_price.reset();
                out.push_back(std::move(at));
            }
        }
        return out;
    }

    void create_infra(const InfraRequest& r, const std::function<void(Event)>& /*emit*/) override {
        std::lock_guard lk(m_);
        choose_ssh_cidr();
        if (!key_id_.empty()) return;
        auto find_key = [&] {
            json keys = call("GET", "/sshkeys");
            if (keys.is_array())
                for (const auto& k : keys)
                    if (blob_of(text_of(k, "key")) == blob_of(r.ssh_public_key))
                        key_id_ = text_of(k, "id");
        };
        try {
            find_key();
            if (key_id_.empty()) {
                try {
                    key_id_ = id_of_text(send("POST", "/sshkeys",
                                              json{{"name", r.name}, {"key", r.ssh_public_key}},
                                              Repeat::once)
                                             .body);
                } catch (const HttpError& e) {
                    // No answer, one cut short, or a server error: it may have been made.
                    if (!e.outcome_unknown()) throw;
                    find_key();
                    if (key_id_.empty()) throw;
                }
                // An answer without an id (cut short, an error page): the key may exist anyway.
                if (key_id_.empty()) find_key();
            }
        } catch (const std::exception& e) {
            rest::throw_provision_error(
                "Verda: registering the pool's SSH key failed: " + error_text(e), e);
        }
        if (key_id_.empty()) throw ProvisionError("Verda: POST /sshkeys answered without an id");
    }

    std::string launch(const LaunchRequest& r) override {
        const std::string& type = r.offer.instance_type;
        const std::string location = r.offer.region.empty()
                                         ? (region_.empty() ? std::string("FIN-01") : region_)
                                         : r.offer.region;
        // As the SDK's is_available(): a type that is not available now is a capacity answer
        // before anything is created.
        try {
            json ok =
                call("GET", fmt::format("/instance-availability/{}?isSpot={}&location_code={}",
                                        url_encode(type), r.spot ? "true" : "false",
                                        url_encode(location)));
            if (ok.is_boolean() && !ok.get<bool>())
                throw CapacityError(fmt::format("Verda: {}{} is not available in {} now", type,
                                                r.spot ? " (spot)" : "", location));
        } catch (const HttpError& e) {
            if (is_unknown_type(e)) throw UnknownInstanceTypeError("Verda: " + error_text(e));
            if (is_capacity(e)) throw CapacityError("Verda: " + error_text(e));
            rest::throw_provision_error("Verda GET /instance-availability failed: " + error_text(e),
                                        e);
        }
        std::string key;
        {
            std::lock_guard lk(m_);
            key = key_id_;
        }
        const std::string hostname = fmt::format("{}-n{}", r.name, r.node);
        const std::string script_name = fmt::format(
            "{}-{}", hostname,
            r.client_token.substr(r.client_token.size() > 12 ? r.client_token.size() - 12 : 0));
        // A script whose answer is lost (none came, cut short, an error page, a server error)
        // may exist anyway, under its name; a launch with no script id would fail as "not
        // found".
        auto find_script = [&]() -> std::string {
            json all = call("GET", "/scripts");
            if (all.is_array())
                for (const auto& sc : all)
                    if (text_of(sc, "name") == script_name) return text_of(sc, "id");
            return {};
        };
        std::string script_id;
        try {
            // Sent twice at most: a second time only once the first is known not to be there.
            for (int attempt = 1; attempt <= 2 && script_id.empty(); ++attempt) {
                try {
                    script_id = id_of_text(send("POST", "/scripts",
                                                json{{"name", script_name},
                                                     {"script", with_host_firewall(r.boot_script)}},
                                                Repeat::once)
                                               .body);
                } catch (const HttpError& e) {
                    if (!e.outcome_unknown()) throw;
                    script_id = find_script();
                    if (script_id.empty() && attempt == 2) throw;
                    continue;
                }
                if (script_id.empty()) script_id = find_script();
            }
        } catch (const std::exception& e) {
            rest::throw_provision_error("Verda POST /scripts failed: " + error_text(e), e);
        }
        if (script_id.empty())
            throw ProvisionError("Verda: POST /scripts answered without an id, and no script " +
                                 script_name + " was found");
        {
            std::lock_guard lk(m_);
            scripts_.push_back(script_id);
        }
        json body = {{"instance_type", type},
                     {"image", image_},
                     {"ssh_key_ids", key.empty() ? json::array() : json::array({key})},
                     {"startup_script_id", script_id},
                     {"hostname", hostname},
                     {"description", std::string(kDescriptionPrefix) + r.pool_id},
                     {"location_code", location},
                     {"is_spot", r.spot}};
        try {
            std::string id = id_of_text(send("POST", "/instances", body, Repeat::once).body);
            // A 2xx without an id (cut short, not the API's format): it may have started.
            if (id.empty())
                throw LaunchAnswerLostError("Verda: POST /instances answered without an id");
            return id;
        } catch (const HttpError& e) {
            if (is_unknown_type(e)) throw UnknownInstanceTypeError("Verda: " + error_text(e));
            if (is_capacity(e)) throw CapacityError("Verda: " + error_text(e));
            // No answer, one cut short, or a server error: the instance may have been made.
            if (e.outcome_unknown())
                throw LaunchAnswerLostError("Verda: POST /instances: " + error_text(e));
            rest::throw_provision_error("Verda POST /instances failed: " + error_text(e), e);
        }
    }

    std::vector<CloudInstance> describe(const std::vector<std::string>& ids) override {
        std::vector<CloudInstance> out;
        for (const auto& id : ids) {
            try {
                json i = call("GET", "/instances/" + url_encode(id));
                if (i.is_array() && !i.empty()) i = i[0];
                CloudInstance c = instance_from(i);
                c.id = id;
                out.push_back(std::move(c));
            } catch (const HttpError& e) {
                if (!is_not_found(e)) throw;
                out.push_back(rest::unknown_instance(id, kProvider));
            }
        }
        return out;
    }

    void terminate(const std::vector<std::string>& ids) override {
        if (ids.empty()) return;
        // The OS volumes go with the instances (a kept volume is billed).
        std::vector<std::string> live, volumes;
        for (const auto& id : ids) {
            try {
                json i = call("GET", "/instances/" + url_encode(id));
                if (i.is_array() && !i.empty()) i = i[0];
                const std::string status = text_of(i, "status");
                if (status == "discontinued" || status == "deleted") continue;
                live.push_back(id);
                if (auto v = text_of(i, "os_volume_id"); !v.empty()) volumes.push_back(v);
            } catch (const HttpError& e) {
                if (!is_not_found(e)) live.push_back(id);
            }
        }
        {
            std::lock_guard lk(m_);
            for (const auto& id : ids) terminated_.insert(id);
        }
        if (live.empty()) return;
        json body = {{"id", live},
                     {"action", "delete"},
                     {"volume_ids", volumes},
                     {"delete_permanently", true}};
        try {
            (void)send("PUT", "/instances", body);
        } catch (const HttpError& e) {
            if (e.status() != 400 && !is_not_found(e)) throw;
            // One id at a time, plain: an id that is gone, or fields this API version lacks.
            std::string failures;
            for (const auto& id : live) {
                try {
                    (void)send("PUT", "/instances", json{{"id", id}, {"action", "delete"}});
                } catch (const HttpError& e1) {
                    if (is_not_found(e1)) continue;
                    failures += (failures.empty() ? "" : "; ") + id + ": " + error_text(e1);
                }
            }
            if (!failures.empty())
                throw ProvisionError("Verda: deleting instances failed: " + failures);
        }
    }

    std::vector<CloudInstance> list(std::string_view pool_id) override {
        std::vector<CloudInstance> out;
        json all = call("GET", "/instances");
        if (!all.is_array()) return out;
        for (const auto& i : all) {
            CloudInstance c = instance_from(i);
            if (c.state == CloudInstance::State::gone) continue;
            if (text_of(i, "description").rfind(kDescriptionPrefix, 0) != 0) continue;
            if (!pool_id.empty() && c.pool_id != pool_id) continue;
            out.push_back(std::move(c));
        }
        return out;
    }

    void delete_infra(std::string_view pool_id) noexcept override {
        std::lock_guard lk(m_);
        const std::string prefix = "sky-" + std::string(pool_id);
        try {
            // Every node's startup script (named after the pool), then the pool's key.
            std::vector<std::string> scripts = scripts_;
            try {
                json all = call("GET", "/scripts");
                if (all.is_array())
                    for (const auto& s : all)
                        if (text_of(s, "name").rfind(prefix + "-", 0) == 0 &&
                            std::find(scripts.begin(), scripts.end(), text_of(s, "id")) ==
                                scripts.end())
                            scripts.push_back(text_of(s, "id"));
            } catch (...) {
            }
            if (delete_each("/scripts", "scripts", scripts)) scripts_.clear();
            std::vector<std::string> keys;
            if (!key_id_.empty()) keys.push_back(key_id_);
            try {
                json all = call("GET", "/sshkeys");
                if (all.is_array())
                    for (const auto& k : all)
                        if (text_of(k, "name") == prefix &&
                            std::find(keys.begin(), keys.end(), text_of(k, "id")) == keys.end())
                            keys.push_back(text_of(k, "id"));
            } catch (...) {
            }
            if (delete_each("/sshkeys", "keys", keys)) key_id_.clear();
        } catch (...) {
        }
    }

    std::vector<std::string> infra_left(std::string_view pool_id) noexcept override {
        std::vector<std::string> left;
        const std::string prefix = "sky-" + std::string(pool_id);
        try {
            json scripts = call("GET", "/scripts");
            if (scripts.is_array())
                for (const auto& s : scripts)
                    if (text_of(s, "name").rfind(prefix + "-", 0) == 0)
                        left.push_back(fmt::format("startup script {} ({})", text_of(s, "id"),
                                                   text_of(s, "name")));
            json keys = call("GET", "/sshkeys");
            if (keys.is_array())
                for (const auto& k : keys)
                    if (text_of(k, "name") == prefix)
                        left.push_back(fmt::format("SSH key {} ({})", text_of(k, "id"), prefix));
        } catch (const std::exception& e) {
            left.push_back(fmt::format("SSH key and startup scripts {} (cannot tell: {})", prefix,
                                       error_text(e)));
        } catch (...) {
        }
        return left;
    }

    CloudLogin login() const override {
        CloudLogin l;
        l.user = "root";
        // A shut-down instance is still billed for its volume: only deletion ends the cost.
        l.power_off_on_expiry = false;
        l.rotate_host_key = true;
        l.boot_wait = std::chrono::seconds(600);  // Verda's instances take minutes to boot
        // Keys and scripts are never held by a machine: a short wait rides out a failed call.
        l.infra_wait = std::chrono::seconds(30);
        l.host_firewall = true;  // no firewall API: the boot script's own
        return l;
    }

private:
    // DELETE `path` {field: ids}: all at once, else one at a time (one id that is gone fails the
    // whole call; 404 is success). Whether every id is gone now. Never throws.
    bool delete_each(const std::string& path, const char* field,
                     const std::vector<std::string>& ids) noexcept {
        if (ids.empty()) return true;
        try {
            (void)send("DELETE", path, json{{field, ids}});
            return true;
        } catch (...) {
        }
        bool all = true;
        for (const auto& id : ids) {
            try {
                (void)send("DELETE", path, json{{field, json::array({id})}});
            } catch (const HttpError& e) {
                all = all && is_not_found(e);
            } catch (...) {
                all = false;
            }
        }
        return all;
    }

    // Who may reach the nodes' SSH port through their host firewall: SKY_CLIENT_CIDR, else this
    // client's address as checkip sees it (with Verda's own endpoint), else anyone, with a
    // notice. Once per pool; caller holds m_.
    void choose_ssh_cidr() {
        if (ssh_cidr_chosen_) return;
        ssh_cidr_ = client_cidr_from_env();
        if (!ssh_cidr_ && api_->config().endpoint.source == "default")
            ssh_cidr_ = detect_client_cidr();
        ssh_cidr_chosen_ = true;
        // A notice, as AWS gives it: once per process, on stderr, not an error event.
        if (!ssh_cidr_)
            notice_once(
                "Verda: SSH (port 22) of this pool's instances is open to every address, since "
                "this client's public address is unknown; set SKY_CLIENT_CIDR (e.g. "
                "203.0.113.7/32) to allow only it");
    }

    // The boot script with sky's host firewall first (Verda has no firewall API): SSH from the
    // client, every port from the pool's own instances (admitted over SSH as they start),
    // nothing else in, before anything of the pool listens.
    std::string with_host_firewall(const std::string& boot_script) {
        std::optional<std::string> cidr;
        {
            std::lock_guard lk(m_);
            cidr = ssh_cidr_;
        }
        const auto first_line = boot_script.find('\n');
        if (boot_script.rfind("#!", 0) != 0 || first_line == std::string::npos)
            return "#!/bin/bash\n" + host_firewall_script(cidr) + boot_script;
        return boot_script.substr(0, first_line + 1) + host_firewall_script(cidr) +
               boot_script.substr(first_line + 1);
    }

    CloudInstance instance_from(const json& i) {
        CloudInstance c;
        c.id = text_of(i, "id");
        const std::string status = text_of(i, "status");
        if (status == "running")
            c.state = CloudInstance::State::running;
        else if (status == "ordered" || status == "provisioning" || status == "validating" ||
                 status == "new" || status == "restoring" || status == "starting")
            c.state = CloudInstance::State::pending;
        else if (status == "discontinued" || status == "deleted")
            c.state = CloudInstance::State::gone;
        else
            c.state = CloudInstance::State::stopping;  // offline, error, hibernating, deleting
        c.public_ip = text_of(i, "ip");
        c.spot = i.value("is_spot", false);
        c.instance_type = text_of(i, "instance_type");
        const std::string d = text_of(i, "description");
        if (d.rfind(kDescriptionPrefix, 0) == 0) c.pool_id = d.substr(kDescriptionPrefix.size());
        if (c.state != CloudInstance::State::running && c.state != CloudInstance::State::pending) {
            c.reason = "instance status " + status;
            std::lock_guard lk(m_);
            // A spot instance that ends without sky asking was taken back.
            if (c.spot && !terminated_.count(c.id)) {
                c.preempted = true;
                c.reason = "Verda reclaimed the spot instance (status " + status + ")";
            }
        }
        return c;
    }

    // The bearer token: fetched on first use, renewed before it expires.
    std::string access_token() {
        std::lock_guard lk(token_m_);
        if (token_.empty() || Clock::now() >= token_expiry_) renew_locked();
        return token_;
    }

    // After a 401 for `seen`: the refresh token first, then the client credentials.
    void renew(const std::string& seen) {
        std::lock_guard lk(token_m_);
        if (token_ != seen) return;  // another thread renewed it already
        token_.clear();
        renew_locked();
    }

    void renew_locked() {
        auto take = [&](const json& t) {
            token_ = text_of(t, "access_token");
            if (auto r = text_of(t, "refresh_token"); !r.empty()) refresh_ = r;
            {
                std::lock_guard lk(issued_m_);
                for (const std::string* v : {&token_, &refresh_})
                    if (!v->empty() &&
                        std::find(issued_.begin(), issued_.end(), *v) == issued_.end())
                        issued_.push_back(*v);
                if (issued_.size() > 16) issued_.erase(issued_.begin(), issued_.end() - 16);
            }
            const int ttl = rest::int_of(t, "expires_in", 0, 30 * 86400).value_or(3600);
            token_expiry_ = Clock::now() + std::chrono::seconds(std::max(30, ttl - 30));
            if (token_.empty()) throw ProvisionError("Verda: the token answer has no access_token");
        };
        if (!refresh_.empty()) {
            try {
                take(token_api_->call(
                    "POST", "/oauth2/token",
                    json{{"grant_type", "refresh_token"}, {"refresh_token", refresh_}}));
                return;
            } catch (const HttpError&) {
                refresh_.clear();  // expired or revoked: start over
            }
        }
        try {
            take(token_api_->call("POST", "/oauth2/token",
                                  json{{"grant_type", "client_credentials"},
                                       {"client_id", creds_.id},
                                       {"client_secret", creds_.secret}}));
        } catch (const HttpError& e) {
            rest::throw_provision_error(
                fmt::format("Verda: authentication with the client credentials from {} failed: {}",
                            creds_.source, error_text(e)),
                e);
        }
    }

    std::string current_token() {
        std::lock_guard lk(token_m_);
        return token_;
    }

    // A call with one renewal of the token after a 401 (an expired or revoked token).
    HttpResponse send(const std::string& method, const std::string& path,
                      const std::optional<json>& body = std::nullopt,
                      Repeat repeat = Repeat::safe) {
        for (int attempt = 0;; ++attempt) {
            const std::string seen = current_token();
            try {
                return api_->send(method, path, body, repeat);
            } catch (const HttpError& e) {
                if (e.status() != 401 || attempt > 0) throw;
                renew(seen.empty() ? current_token() : seen);
            }
        }
    }

    json call(const std::string& method, const std::string& path,
              const std::optional<json>& body = std::nullopt, Repeat repeat = Repeat::safe) {
        HttpResponse last;
        if (auto answer =
                rest::json_answer([&] { return send(method, path, body, repeat); }, repeat, last))
            return std::move(*answer);
        throw sky::Error(
            fmt::format("Verda: {} {} answered with something that is not JSON", method, path));
    }

    std::unique_ptr<rest::JsonApi> api_, token_api_;
    Credentials creds_;
    std::string region_;
    std::string image_;

    std::mutex token_m_;
    std::string token_, refresh_;
    std::mutex issued_m_;
    std::vector<std::string> issued_;  // tokens received, for the redactor
    Clock::time_point token_expiry_{};

    std::mutex m_;
    std::optional<std::string> ssh_cidr_;
    bool ssh_cidr_chosen_ = false;  // the key, the scripts and what sky terminated
    std::string key_id_;
    std::vector<std::string> scripts_;
    std::set<std::string> terminated_;
};

}  // namespace

std::unique_ptr<CloudAdapter> make_verda_adapter(const Verda& config) {
    return std::make_unique<VerdaAdapter>(config);
}

ProviderDescriptor verda_provider() {
    return rest::cloud_descriptor<Verda>(
        {"verda", "Verda", "sky::Verda"},
        ProviderFacts{
            .exposure =
                [](const PoolSpec&) {
                    return Exposure::pool_machines_only(
                        "the host firewall sky sets on each machine admits only the pool's "
                        "machines");
                },
            .billing = BillingPolicy{},  // per second, no minimum (less certain)
            .runs_on_this_machine = false,
        },
        make_verda_adapter,
        [](const Verda& c, std::vector<std::string>& problems) {
            // Location codes are upper-case letters, a dash and digits ("FIN-01", "ICE-01").
            const std::string& r = c.region;
            const bool ok =
                r.empty() ||
                (r.size() <= 16 && std::all_of(r.begin(), r.end(), [](unsigned char ch) {
                     return std::isupper(ch) || std::isdigit(ch) || ch == '-';
                 }));
            if (!ok)
                problems.push_back(fmt::format(
                    "provider: sky::Verda region must be a location code such as \"FIN-01\" (or "
                    "empty for any), got \"{}\"",
                    r));
        },
        [] {
            const bool datacrunch = env_or("VERDA_CLIENT_ID").empty() &&
                                    !env_or("DATACRUNCH_CLIENT_ID").empty() &&
                                    !env_or("DATACRUNCH_CLIENT_SECRET").empty();
            auto keys =
                datacrunch
                    ? std::vector<const char*>{"DATACRUNCH_CLIENT_ID", "DATACRUNCH_CLIENT_SECRET"}
                    : std::vector<const char*>{"VERDA_CLIENT_ID", "VERDA_CLIENT_SECRET"};
            return rest::env_credentials(keys, "VERDA_API_URL", "https://api.verda.com/v1")();
        });
}

}  // namespace sky::detail
