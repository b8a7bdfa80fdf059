// The fake Verda API v1. Shapes from verda-cloud/sdk-python (formerly datacrunch-python):
// authentication, instance_types, instances, ssh_keys, startup_scripts and its unit tests' mock
// payloads; errors are {"code", "message"} with status >= 400.
#include "fakes/verda/fake_verda.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace sky::test {

namespace {

using nlohmann::json;

HttpReply error(int status, const std::string& code, const std::string& message) {
    return {status, json{{"code", code}, {"message", message}}.dump()};
}

HttpReply text(int status, const std::string& body) {
    return {status, body, {{"Content-Type", "text/plain; charset=utf-8"}}};
}

std::optional<json> json_body(const HttpRequest& r) {
    json b = json::parse(r.body, nullptr, false);
    if (b.is_discarded()) return std::nullopt;
    return b;
}

json type(const std::string& name, const std::string& gpu, int gpus, int gpu_gb, int cores, int ram,
          const std::string& price, const std::string& spot) {
    return {
        {"id", "c01dd00d-0000-4000-a000-" +
                   fmt::format("{:012d}", std::hash<std::string>{}(name) % 1000000000000ULL)},
        {"instance_type", name},
        {"price_per_hour", price},
        {"spot_price", spot},
        {"description", gpu.empty() ? "CPU instance" : "Dedicated " + gpu},
        {"cpu", {{"description", fmt::format("{} CPU", cores)}, {"number_of_cores", cores}}},
        {"gpu",
         {{"description", gpus ? fmt::format("{}x {}", gpus, gpu) : ""}, {"number_of_gpus", gpus}}},
        {"memory", {{"description", fmt::format("{}GB RAM", ram)}, {"size_in_gigabytes", ram}}},
        {"gpu_memory",
         {{"description", fmt::format("{}GB GPU RAM", gpu_gb * gpus)},
          {"size_in_gigabytes", gpu_gb * gpus}}},
        {"storage", {{"description", "dynamic"}}},
        {"model", gpu},
        {"currency", "usd"}};
}

}  // namespace

std::vector<json> FakeVerda::default_types() {
    return {type("1H100.80S.30V", "H100 SXM5 80GB", 1, 80, 30, 120, "2.19", "0.89"),
            type("8H100.80S.176V", "H100 SXM5 80GB", 8, 80, 176, 960, "17.52", "7.12"),
            type("1A100.80S.22V", "A100 SXM4 80GB", 1, 80, 22, 120, "1.29", "0.52"),
            type("8A100.80S.176V", "A100 SXM4 80GB", 8, 80, 176, 960, "10.32", "4.16"),
            type("CPU.4V.16G", "", 0, 0, 4, 16, "0.0355", "0.0142")};
}

FakeVerda::FakeVerda(FakeVerdaOptions options)
    : RestFake("nginx", "/v1", options.hosts), options_(std::move(options)) {
    if (options_.types.empty()) options_.types = default_types();
    if (options_.on_demand.empty())
        for (const auto& t : options_.types)
            options_.on_demand["FIN-01"].insert(t["instance_type"]);
    if (options_.spot.empty())
        for (const auto& t : options_.types) options_.spot["FIN-01"].insert(t["instance_type"]);
    auto route = guarded_routes(http_, this, &FakeVerda::refuse);
    http_.route("POST", "/v1/oauth2/token", [this](const HttpRequest& r) { return token(r); });
    route("GET", "/v1/instance-types", &FakeVerda::types);
    route("GET", "/v1/instance-availability", &FakeVerda::availability);
    route("GET", "/v1/instance-availability/{type}", &FakeVerda::available_one);
    for (const char* keys : {"/v1/sshkeys", "/v1/ssh-keys"}) {
        route("GET", keys, &FakeVerda::keys_get);
        route("POST", keys, &FakeVerda::keys_post);
        route("DELETE", keys, &FakeVerda::keys_delete);
        route("GET", std::string(keys) + "/{id}", &FakeVerda::keys_get);
        route("DELETE", std::string(keys) + "/{id}", &FakeVerda::keys_delete);
    }
    route("GET", "/v1/scripts", &FakeVerda::scripts_get);
    route("POST", "/v1/scripts", &FakeVerda::scripts_post);
    route("DELETE", "/v1/scripts", &FakeVerda::scripts_delete);
    route("DELETE", "/v1/scripts/{id}", &FakeVerda::scripts_delete);
    route("POST", "/v1/instances", &FakeVerda::instances_post);
    route("GET", "/v1/instances", &FakeVerda::instances_get);
    route("PUT", "/v1/instances", &FakeVerda::instances_put);
    route("GET", "/v1/instances/{id}", &FakeVerda::instance_get);
}

std::string FakeVerda::new_id() { return fmt::format("8f6a7c1e-4b2d-4e0a-9c3b-{:012x}", next_++); }

std::optional<HttpReply> FakeVerda::refuse(const HttpRequest& r) {
    const std::string auth = r.header("Authorization");
    const std::string prefix = "Bearer ";
    if (auth.rfind(prefix, 0) != 0)
        return error(401, "unauthorized_request", "Missing or malformed Authorization header");
    {
        std::lock_guard lk(m_);
        auto it = access_.find(auth.substr(prefix.size()));
        if (it == access_.end()) return error(401, "unauthorized_request", "Invalid access token");
        if (it->second < generation_)
            return error(401, "unauthorized_request", "Access token is expired");
    }
    if ((r.method == "POST" || r.method == "PUT") && !r.body.empty() && !json_declared(r))
        return error(400, "invalid_request", "Content-Type must be application/json");
    return std::nullopt;
}

HttpReply FakeVerda::token(const HttpRequest& r) {
    // JSON, as the SDK sends it; a form body is refused.
    if (!json_declared(r))
        return error(400, "invalid_request", "The token endpoint takes a JSON body");
    auto b = json_body(r);
    if (!b || !b->is_object()) return error(400, "invalid_request", "Invalid JSON body");
    const std::string grant = b->value("grant_type", "");
    std::lock_guard lk(m_);
    if (grant == "client_credentials") {
        if (b->value("client_id", "") != options_.client_id ||
            b->value("client_secret", "") != options_.client_secret)
            return error(401, "unauthorized_request", "Invalid client credentials");
        ++issued_;
    } else if (grant == "refresh_token") {
        const std::string rt = b->value("refresh_token", "");
        if (!refresh_.count(rt)) return error(401, "unauthorized_request", "Invalid refresh token");
        refresh_.erase(rt);
        ++refreshes_;
    } else {
        return error(400, "invalid_request", "Unsupported grant_type");
    }
    const std::string access =
        fmt::format("eyJhbGciOiJIUzI1NiJ9.fake.{:08x}", next_++ * 2654435761u);
    const std::string refresh = fmt::format("rt-{:08x}", next_++ * 2246822519u);
    access_[access] = generation_;
    refresh_.insert(refresh);
    return {200, json{{"access_token", access},
                      {"refresh_token", refresh},
                      {"scope", "cloud-api-v1"},
                      {"token_type", "Bearer"},
                      {"expires_in", options_.token_lifetime_s}}
                     .dump()};
}

HttpReply FakeVerda::types(const HttpRequest&) { return {200, json(options_.types).dump()}; }

HttpReply FakeVerda::availability(const HttpRequest& r) {
    auto q = r.query_params();
    const std::string spot = q.count("isSpot") ? q["isSpot"] : q["is_spot"];
    if (!spot.empty() && spot != "true" && spot != "false")
        return error(400, "invalid_request", "isSpot must be true or false");
    std::lock_guard lk(m_);
    const auto& table = spot == "true" ? options_.spot : options_.on_demand;
    json out = json::array();
    for (const auto& [loc, types] : table) {
        if (q.count("locationCode") && q["locationCode"] != loc) continue;
        out.push_back({{"location_code", loc}, {"availabilities", types}});
    }
    return {200, out.dump()};
}

HttpReply FakeVerda::available_one(const HttpRequest& r) {
    auto q = r.query_params();
    const std::string& t = r.params.at("type");
    if (options_.unknown_types.count(t) ||
        std::none_of(options_.types.begin(), options_.types.end(),
                     [&](const json& x) { return x["instance_type"] == t; }))
        return error(400, "invalid_request", "Invalid instance type " + t);
    std::lock_guard lk(m_);
    const auto& table = q["isSpot"] == "true" ? options_.spot : options_.on_demand;
    bool ok = false;
    for (const auto& [loc, types] : table)
        if ((!q.count("location_code") || q["location_code"] == loc) && types.count(t)) ok = true;
    return {200, ok ? "true" : "false"};
}

HttpReply FakeVerda::keys_get(const HttpRequest& r) {
    std::lock_guard lk(m_);
    if (r.params.count("id")) {
        for (const auto& k : keys_)
            if (k["id"] == r.params.at("id")) return {200, json::array({k}).dump()};
        return error(404, "not_found", "SSH key not found");
    }
    return {200, json(keys_).dump()};
}

HttpReply FakeVerda::keys_post(const HttpRequest& r) {
    auto b = json_body(r);
    if (!b || !b->is_object()) return error(400, "invalid_request", "Invalid JSON body");
    for (auto& [k, v] : b->items())
        if (k != "name" && k != "key") return error(400, "invalid_request", "Unknown field " + k);
    if (!b->contains("name") || !(*b)["name"].is_string() || !b->contains("key") ||
        !(*b)["key"].is_string())
        return error(400, "invalid_request", "name and key are required");
    const std::string key = (*b)["key"];
    if (key.rfind("ssh-", 0) != 0) return error(400, "invalid_request", "Invalid public key");
    std::lock_guard lk(m_);
    const std::string id = new_id();
    keys_.push_back({{"id", id}, {"name", (*b)["name"]}, {"key", key}});
    return text(201, id);
}

HttpReply FakeVerda::keys_delete(const HttpRequest& r) {
    std::vector<std::string> ids;
    if (r.params.count("id")) {
        ids.push_back(r.params.at("id"));
    } else {
        auto b = json_body(r);
        if (!b || !b->is_object() || !b->contains("keys") || !(*b)["keys"].is_array())
            return error(400, "invalid_request", "keys is required");
        for (const auto& k : (*b)["keys"]) ids.push_back(k.get<std::string>());
    }
    std::lock_guard lk(m_);
    for (const auto& id : ids) {
        auto it =
            std::find_if(keys_.begin(), keys_.end(), [&](const json& k) { return k["id"] == id; });
        if (it == keys_.end()) return error(404, "not_found", "SSH key not found");
        keys_.erase(it);
    }
    return {200, ""};
}

HttpReply FakeVerda::scripts_get(const HttpRequest&) {
    std::lock_guard lk(m_);
    return {200, json(scripts_).dump()};
}

HttpReply FakeVerda::scripts_post(const HttpRequest& r) {
    auto b = json_body(r);
    if (!b || !b->is_object()) return error(400, "invalid_request", "Invalid JSON body");
    for (auto& [k, v] : b->items())
        if (k != "name" && k != "script")
            return error(400, "invalid_request", "Unknown field " + k);
    if (!b->contains("name") || !(*b)["name"].is_string() || !b->contains("script") ||
        !(*b)["script"].is_string())
        return error(400, "invalid_request", "name and script are required");
    std::lock_guard lk(m_);
    const std::string id = new_id();
    scripts_.push_back({{"id", id}, {"name", (*b)["name"]}, {"script", (*b)["script"]}});
    return text(201, id);
}

HttpReply FakeVerda::scripts_delete(const HttpRequest& r) {
    std::vector<std::string> ids;
    if (r.params.count("id")) {
        ids.push_back(r.params.at("id"));
    } else {
        auto b = json_body(r);
        if (!b || !b->is_object() || !b->contains("scripts") || !(*b)["scripts"].is_array())
            return error(400, "invalid_request", "scripts is required");
        for (const auto& s : (*b)["scripts"]) ids.push_back(s.get<std::string>());
    }
    std::lock_guard lk(m_);
    for (const auto& id : ids) {
        auto it = std::find_if(scripts_.begin(), scripts_.end(),
                               [&](const json& s) { return s["id"] == id; });
        if (it == scripts_.end()) return error(404, "not_found", "Startup script not found");
        scripts_.erase(it);
    }
    return {200, ""};
}

HttpReply FakeVerda::instances_post(const HttpRequest& r) {
    auto b = json_body(r);
    if (!b || !b->is_object()) return error(400, "invalid_request", "Invalid JSON body");
    static const std::set<std::string> known = {
        "instance_type", "image",     "ssh_key_ids", "startup_script_id", "hostname", "description",
        "location_code", "os_volume", "volumes",     "existing_volumes",  "is_spot",  "coupon",
        "contract",      "pricing"};
    for (auto& [k, v] : b->items())
        if (!known.count(k)) return error(400, "invalid_request", "Unknown field " + k);
    for (const char* k : {"instance_type", "image", "hostname", "description"})
        if (!b->contains(k) || !(*b)[k].is_string() || (*b)[k].get<std::string>().empty())
            return error(400, "invalid_request", std::string(k) + " is required");
    if (b->contains("is_spot") && !(*b)["is_spot"].is_boolean())
        return error(400, "invalid_request", "is_spot must be a boolean");
    const std::string t = (*b)["instance_type"];
    auto type = std::find_if(options_.types.begin(), options_.types.end(),
                             [&](const json& x) { return x["instance_type"] == t; });
    if (type == options_.types.end() || options_.unknown_types.count(t))
        return error(400, "invalid_request", "Invalid instance type " + t);
    const std::string loc = b->value("location_code", "FIN-03");
    const bool spot = b->value("is_spot", false);
    std::lock_guard lk(m_);
    if (!funds_)
        return error(400, "insufficient_funds",
                     "Not enough funds in your account to deploy this instance");
    const auto& table = spot ? options_.spot : options_.on_demand;
    auto at = table.find(loc);
    if (at == table.end() || !at->second.count(t))
        return error(400, "invalid_request",
                     fmt::format("Instance type {} is not available in {}", t, loc));
    std::vector<std::string> keys;
    if (b->contains("ssh_key_ids")) {
        if (!(*b)["ssh_key_ids"].is_array())
            return error(400, "invalid_request", "ssh_key_ids must be a list");
        for (const auto& k : (*b)["ssh_key_ids"]) {
            auto it = std::find_if(keys_.begin(), keys_.end(),
                                   [&](const json& x) { return x["id"] == k; });
            if (it == keys_.end()) return error(404, "not_found", "SSH key not found");
            keys.push_back((*it)["key"]);
        }
    }
    std::string script;
    if (b->contains("startup_script_id") && !(*b)["startup_script_id"].is_null()) {
        auto it = std::find_if(scripts_.begin(), scripts_.end(),
                               [&](const json& x) { return x["id"] == (*b)["startup_script_id"]; });
        if (it == scripts_.end()) return error(404, "not_found", "Startup script not found");
        script = (*it)["script"];
    }
    const std::string id = new_id();
    FakeMachine* inst =
        add_machine(id, script, keys, fmt::format("135.181.0.{}", machines_.size() + 10), 22);
    if (!inst)
        return error(400, "invalid_request",
                     fmt::format("Instance type {} is not available in {}", t, loc));
    inst->body = {{"id", id},
                  {"instance_type", t},
                  {"price_per_hour", std::stod((*type)["price_per_hour"].get<std::string>())},
                  {"hostname", (*b)["hostname"]},
                  {"description", (*b)["description"]},
                  {"status", "ordered"},
                  {"created_at", "2026-11-23T10:00:00.000Z"},
                  {"ssh_key_ids", b->value("ssh_key_ids", json::array())},
                  {"cpu", (*type)["cpu"]},
                  {"gpu", (*type)["gpu"]},
                  {"memory", (*type)["memory"]},
                  {"storage", (*type)["storage"]},
                  {"gpu_memory", (*type)["gpu_memory"]},
                  {"ip", nullptr},
                  {"os_volume_id", "vol-" + id.substr(id.size() - 12)},
                  {"location", loc},
                  {"image", (*b)["image"]},
                  {"startup_script_id", b->value("startup_script_id", json())},
                  {"is_spot", spot},
                  {"contract", spot ? "SPOT" : "PAY_AS_YOU_GO"},
                  {"pricing", "FIXED_PRICE"}};
    return text(202, id);
}

json FakeVerda::view(const std::string& id) const {
    const FakeMachine& i = machines_.at(id);
    json v = i.body;
    if (i.reclaimed) {
        v["status"] = "discontinued";
    } else if (i.polls >= options_.gets_until_running) {
        v["status"] = "running";
        v["ip"] = i.ip;
    } else if (i.polls > 0) {
        v["status"] = "provisioning";
    }
    return v;
}

HttpReply FakeVerda::instance_get(const HttpRequest& r) {
    std::lock_guard lk(m_);
    FakeMachine* i = live(r.params.at("id"));
    if (!i) return error(404, "not_found", "Instance not found");
    ++i->polls;
    return {200, view(r.params.at("id")).dump()};
}

HttpReply FakeVerda::instances_get(const HttpRequest& r) {
    auto q = r.query_params();
    json out = json::array();
    for (json& v : live_views()) {
        if (q.count("status") && !q["status"].empty() && v["status"] != q["status"]) continue;
        out.push_back(std::move(v));
    }
    return {200, out.dump()};
}

HttpReply FakeVerda::instances_put(const HttpRequest& r) {
    auto b = json_body(r);
    if (!b || !b->is_object()) return error(400, "invalid_request", "Invalid JSON body");
    for (auto& [k, v] : b->items())
        if (k != "id" && k != "action" && k != "volume_ids" && k != "delete_permanently")
            return error(400, "invalid_request", "Unknown field " + k);
    static const std::set<std::string> actions = {"boot",    "start",          "shutdown",
                                                  "delete",  "discontinue",    "hibernate",
                                                  "restore", "force_shutdown", "delete_stuck"};
    if (!b->contains("action") || !(*b)["action"].is_string() || !actions.count((*b)["action"]))
        return error(400, "invalid_request", "Invalid action");
    std::vector<std::string> ids;
    if (b->contains("id") && (*b)["id"].is_string())
        ids.push_back((*b)["id"]);
    else if (b->contains("id") && (*b)["id"].is_array())
        for (const auto& x : (*b)["id"]) ids.push_back(x.get<std::string>());
    else
        return error(400, "invalid_request", "id is required");
    std::lock_guard lk(m_);
    for (const auto& id : ids)
        if (!live(id)) return error(404, "not_found", "Instance " + id + " not found");
    if ((*b)["action"] == "delete")
        for (const auto& id : ids) remove_machine(id);
    return {202, ""};
}

void FakeVerda::expire_tokens() {
    std::lock_guard lk(m_);
    ++generation_;
}

void FakeVerda::set_funds(bool enough) {
    std::lock_guard lk(m_);
    funds_ = enough;
}

void FakeVerda::set_available(const std::string& t, bool on_demand, bool spot) {
    std::lock_guard lk(m_);
    for (auto* table : {&options_.on_demand, &options_.spot}) {
        const bool want = table == &options_.on_demand ? on_demand : spot;
        for (auto& [loc, types] : *table) {
            if (want)
                types.insert(t);
            else
                types.erase(t);
        }
    }
}

void FakeVerda::preempt(const std::string& id) { reclaim(id); }

int FakeVerda::alive() const {
    int n = 0;
    for (const auto& i : instances())
        if (i["status"] != "discontinued") ++n;
    return n;
}

std::vector<json> FakeVerda::ssh_keys() const {
    std::lock_guard lk(m_);
    return keys_;
}

std::vector<json> FakeVerda::scripts() const {
    std::lock_guard lk(m_);
    return scripts_;
}

int FakeVerda::tokens_issued() const {
    std::lock_guard lk(m_);
    return issued_;
}

int FakeVerda::refreshes() const {
    std::lock_guard lk(m_);
    return refreshes_;
}

}  // namespace sky::test
