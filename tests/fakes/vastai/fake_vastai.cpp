// The fake Vast.ai API v0. Shapes from vast-ai/vast-python (vast.py: search offers, create
// instance, show instance(s), destroy instance, ssh keys) and the API's documented errors.
#include "fakes/vastai/fake_vastai.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace sky::test {

namespace {

using nlohmann::json;

HttpReply fail(int status, const std::string& error, const std::string& msg) {
    return {status, json{{"success", false}, {"error", error}, {"msg", msg}}.dump()};
}

// vast.py's offers_fields (the names a search may filter on), after its aliases.
const std::set<std::string>& offer_fields() {
    static const std::set<std::string> f = {"bw_nvlink",
                                            "compute_cap",
                                            "cpu_arch",
                                            "cpu_cores",
                                            "cpu_cores_effective",
                                            "cpu_ghz",
                                            "cpu_ram",
                                            "cuda_max_good",
                                            "datacenter",
                                            "direct_port_count",
                                            "driver_version",
                                            "disk_bw",
                                            "disk_space",
                                            "dlperf",
                                            "dlperf_per_dphtotal",
                                            "dph_total",
                                            "duration",
                                            "external",
                                            "flops_per_dphtotal",
                                            "gpu_arch",
                                            "gpu_display_active",
                                            "gpu_frac",
                                            "gpu_mem_bw",
                                            "gpu_name",
                                            "gpu_ram",
                                            "gpu_total_ram",
                                            "gpu_max_power",
                                            "gpu_max_temp",
                                            "has_avx",
                                            "host_id",
                                            "id",
                                            "inet_down",
                                            "inet_down_cost",
                                            "inet_up",
                                            "inet_up_cost",
                                            "machine_id",
                                            "min_bid",
                                            "mobo_name",
                                            "num_gpus",
                                            "pci_gen",
                                            "pcie_bw",
                                            "reliability2",
                                            "rentable",
                                            "rented",
                                            "storage_cost",
                                            "static_ip",
                                            "total_flops",
                                            "ubuntu_version",
                                            "verification",
                                            "verified",
                                            "vms_enabled",
                                            "geolocation",
                                            "cluster_id",
                                            "min_bid",
                                            "is_bid",
                                            "gpu_lanes"};
    return f;
}

bool compare(const json& have, const std::string& op, const json& want) {
    if (op == "eq") return have == want;
    if (op == "neq") return have != want;
    if (op == "in" || op == "notin") {
        if (!want.is_array()) throw std::invalid_argument(op + " takes a list");
        bool in = std::find(want.begin(), want.end(), have) != want.end();
        return op == "in" ? in : !in;
    }
    if (!have.is_number() || !want.is_number()) return false;
    const double h = have.get<double>(), w = want.get<double>();
    if (op == "gt") return h > w;
    if (op == "gte") return h >= w;
    if (op == "lt") return h < w;
    if (op == "lte") return h <= w;
    throw std::invalid_argument("unknown operator " + op);
}

json ask(long long id, const std::string& gpu, int gpus, int gpu_ram_mb, double dph, double min_bid,
         double reliability, int cores, int ram_mb) {
    return {{"id", id},
            {"ask_contract_id", id},
            {"machine_id", id % 100000},
            {"host_id", 1000 + id % 97},
            {"num_gpus", gpus},
            {"gpu_name", gpu},
            {"gpu_ram", gpu_ram_mb},
            {"gpu_total_ram", gpu_ram_mb * gpus},
            {"cpu_cores", cores * 2},
            {"cpu_cores_effective", cores},
            {"cpu_ram", ram_mb},
            {"disk_space", 500.0},
            {"dph_base", dph * 0.9},
            {"dph_total", dph},
            {"min_bid", min_bid},
            {"is_bid", false},
            {"reliability2", reliability},
            {"geolocation", "Texas, US"},
            {"public_ipaddr", "198.51.100.7"},
            {"direct_port_count", 100},
            {"rentable", true},
            {"rented", false},
            {"verified", true},
            {"verification", "verified"},
            {"external", false},
            {"cuda_max_good", 12.8},
            {"driver_version", "570.124.04"}};
}

}  // namespace

std::vector<json> FakeVast::default_offers() {
    return {ask(5812001, "RTX 4090", 1, 24564, 0.42, 0.21, 0.998, 16, 64000),
            ask(5812002, "RTX 4090", 1, 24564, 0.45, 0.25, 0.995, 12, 48000),
            ask(5812003, "RTX 4090", 1, 24564, 0.39, 0.19, 0.90, 8, 32000),  // unreliable
            ask(5812004, "H100 SXM", 1, 81559, 2.10, 1.40, 0.999, 24, 192000),
            ask(5812005, "RTX 4090", 2, 24564, 0.85, 0.50, 0.997, 32, 128000),
            ask(5812006, "RTX 4090", 1, 24564, 0.47, 0.26, 0.991, 16, 64000)};
}

FakeVast::FakeVast(FakeVastOptions options)
    : RestFake("nginx", "/api/v0", options.hosts), options_(std::move(options)) {
    if (options_.offers.empty()) options_.offers = default_offers();
    auto route = guarded_routes(http_, this, &FakeVast::refuse);
    route("POST", "/api/v0/bundles/", &FakeVast::search);
    route("GET", "/api/v0/bundles/", &FakeVast::search);
    route("PUT", "/api/v0/asks/{id}/", &FakeVast::rent);
    route("GET", "/api/v0/instances/", &FakeVast::get_all);
    route("GET", "/api/v0/instances/{id}/", &FakeVast::get_one);
    route("DELETE", "/api/v0/instances/{id}/", &FakeVast::destroy);
    route("POST", "/api/v0/ssh/", &FakeVast::key_add);
    route("GET", "/api/v0/ssh/", &FakeVast::key_list);
    route("DELETE", "/api/v0/ssh/{id}/", &FakeVast::key_delete);
}

std::optional<HttpReply> FakeVast::refuse(const HttpRequest& r) {
    if (!has_key(r, options_.api_key, true))
        return json_reply(401, {{"detail", "Authentication credentials were not provided."}});
    if ((r.method == "POST" || r.method == "PUT") && !json_declared(r))
        return fail(400, "invalid_args", "Content-Type must be application/json");
    return std::nullopt;
}

HttpReply FakeVast::search(const HttpRequest& r) {
    json q;
    if (r.method == "GET") {
        q = json::parse(r.query_params()["q"], nullptr, false);
    } else {
        q = json::parse(r.body, nullptr, false);
        // vast-cli wraps the query: {"q": {...}}; the API takes both.
        if (q.is_object() && q.contains("q") && q["q"].is_object()) q = q["q"];
    }
    if (!q.is_object()) return fail(400, "invalid_args", "the query is not a JSON object");
    return search_with(q);
}

HttpReply FakeVast::search_with(const json& q) {
    std::string type = "on-demand";
    int limit = 64;
    std::vector<std::pair<std::string, bool>> order;
    std::vector<std::tuple<std::string, std::string, json>> filters;
    for (auto& [k, v] : q.items()) {
        if (k == "type") {
            type = v.get<std::string>();
            if (type != "on-demand" && type != "ondemand" && type != "bid" && type != "reserved" &&
                type != "interruptible")
                return fail(400, "invalid_args", "type must be on-demand, bid or reserved");
        } else if (k == "limit") {
            if (!v.is_number_integer())
                return fail(400, "invalid_args", "limit must be an integer");
            limit = v.get<int>();
        } else if (k == "order") {
            if (!v.is_array()) return fail(400, "invalid_args", "order must be a list of pairs");
            for (const auto& o : v) {
                if (!o.is_array() || o.size() != 2 ||
                    !offer_fields().count(o[0].get<std::string>()))
                    return fail(400, "invalid_args", "bad order " + o.dump());
                order.push_back({o[0], o[1] == "desc"});
            }
        } else if (k == "allocated_storage" || k == "disable_bundling" || k == "extra_ids") {
        } else {
            if (!offer_fields().count(k)) return fail(400, "invalid_args", "unknown field " + k);
            if (!v.is_object() || v.empty())
                return fail(400, "invalid_args", k + " takes an object of operators");
            for (auto& [op, want] : v.items()) {
                static const std::set<std::string> ops = {"eq", "neq", "gt", "gte",
                                                          "lt", "lte", "in", "notin"};
                if (!ops.count(op)) return fail(400, "invalid_args", "unknown operator " + op);
                filters.emplace_back(k, op, want);
            }
        }
    }
    std::lock_guard lk(m_);
    std::vector<json> out;
    for (const auto& o : options_.offers) {
        if (taken_[o["id"].dump()] && !take_all_) continue;
        bool ok = true;
        try {
            for (const auto& [field, op, want] : filters)
                ok = ok && o.contains(field) && compare(o[field], op, want);
        } catch (const std::exception& e) {
            return fail(400, "invalid_args", e.what());
        }
        if (ok) out.push_back(o);
    }
    std::stable_sort(out.begin(), out.end(), [&](const json& a, const json& b) {
        for (const auto& [f, desc] : order) {
            if (a[f] == b[f]) continue;
            return desc ? a[f] > b[f] : a[f] < b[f];
        }
        return false;
    });
    if (static_cast<int>(out.size()) > limit) out.resize(static_cast<std::size_t>(limit));
    for (auto& o : out) o["is_bid"] = type == "bid" || type == "interruptible";
    return {200, json{{"offers", out}}.dump()};
}

HttpReply FakeVast::rent(const HttpRequest& r) {
    json b = json::parse(r.body, nullptr, false);
    if (!b.is_object()) return fail(400, "invalid_args", "the body is not a JSON object");
    static const std::set<std::string> known = {"client_id",
                                                "image",
                                                "disk",
                                                "env",
                                                "price",
                                                "label",
                                                "onstart",
                                                "runtype",
                                                "args",
                                                "image_login",
                                                "cancel_unavail",
                                                "target_state",
                                                "template_hash_id",
                                                "force",
                                                "user",
                                                "python_utf8",
                                                "lang_utf8",
                                                "use_jupyter_lab",
                                                "jupyter_dir",
                                                "extra",
                                                "args_str",
                                                "use_ssh",
                                                "vm"};
    for (auto& [k, v] : b.items())
        if (!known.count(k)) return fail(400, "invalid_args", "unknown field " + k);
    if (b.value("client_id", "") != "me")
        return fail(400, "invalid_args", "client_id must be \"me\"");
    if (!b.contains("image") || !b["image"].is_string() || b["image"].get<std::string>().empty())
        return fail(400, "invalid_args", "image is required");
    if (b.contains("onstart") &&
        (!b["onstart"].is_string() || b["onstart"].get<std::string>().size() > 4048))
        return fail(400, "invalid_args", "onstart must be a string of at most 4048 characters");
    if (b.contains("disk") && !b["disk"].is_number())
        return fail(400, "invalid_args", "disk must be a number");
    if (b.contains("runtype") && !b["runtype"].is_string())
        return fail(400, "invalid_args", "runtype must be a string");
    const std::string ask_id = r.params.at("id");
    auto offer = std::find_if(options_.offers.begin(), options_.offers.end(),
                              [&](const json& o) { return o["id"].dump() == ask_id; });
    if (offer == options_.offers.end())
        return fail(404, "no_such_ask",
                    fmt::format("Instance type by id {} is not available.", ask_id));
    std::lock_guard lk(m_);
    rents_.push_back(b);
    if (taken_[ask_id] || take_all_)
        return fail(
            410, "no_such_ask",
            fmt::format("Ask {} is no longer available: it was rented by another client.", ask_id));
    const bool bid = b.contains("price") && !b["price"].is_null();
    if (bid) {
        if (!b["price"].is_number() || b["price"].get<double>() < 0.001 ||
            b["price"].get<double>() > 128)
            return fail(400, "invalid_price", "price must be between 0.001 and 128");
        if (b["price"].get<double>() < (*offer)["min_bid"].get<double>())
            return fail(400, "invalid_price", "your bid is below the minimum bid for this machine");
    }
    const std::string id = std::to_string(next_instance_++);
    std::vector<std::string> authorized;
    for (const auto& k : keys_) authorized.push_back(k["public_key"].get<std::string>());
    FakeMachine* inst =
        add_machine(id, b.value("onstart", std::string()), authorized, "198.51.100.7",
                    40000 + static_cast<int>(next_instance_ % 20000));
    if (!inst)
        return fail(
            410, "no_such_ask",
            fmt::format("Ask {} is no longer available: it was rented by another client.", ask_id));
    taken_[ask_id] = true;
    inst->body = {
        {"id", std::stoll(id)},
        {"actual_status", nullptr},
        {"intended_status", "running"},
        {"cur_state", "running"},
        {"next_state", "running"},
        {"label", b.value("label", json())},
        {"image_uuid", b["image"]},
        {"image_runtype", b.value("runtype", "ssh")},
        {"onstart", b.value("onstart", "")},
        {"status_msg", "Pulling image"},
        {"ssh_host", "ssh5.vast.ai"},
        {"ssh_port", 20000 + next_instance_ % 10000},
        {"public_ipaddr", inst->ip},
        {"ports",
         {{"22/tcp", {{{"HostIp", "0.0.0.0"}, {"HostPort", std::to_string(inst->port)}}}}}},
        {"machine_id", (*offer)["machine_id"]},
        {"num_gpus", (*offer)["num_gpus"]},
        {"gpu_name", (*offer)["gpu_name"]},
        {"gpu_ram", (*offer)["gpu_ram"]},
        {"cpu_ram", (*offer)["cpu_ram"]},
        {"disk_space", b.value("disk", 10.0)},
        {"dph_total", bid ? b["price"] : (*offer)["dph_total"]},
        {"is_bid", bid},
        {"min_bid", (*offer)["min_bid"]},
        {"start_date", 1795000000.0},
        {"geolocation", (*offer)["geolocation"]}};
    return {200, json{{"success", true}, {"new_contract", std::stoll(id)}}.dump()};
}

json FakeVast::view(const std::string& id) const {
    const FakeMachine& i = machines_.at(id);
    json v = i.body;
    if (i.reclaimed) {
        v["actual_status"] = "stopped";
        v["intended_status"] = "stopped";
        v["cur_state"] = "stopped";
        v["status_msg"] = "outbid: another client bid more";
    } else if (i.polls > options_.gets_until_running) {
        v["actual_status"] = "running";
        v["status_msg"] = "success, running";
    } else if (i.polls > 0) {
        v["actual_status"] = "loading";
    }
    if (v["actual_status"] != "running") {
        v.erase("ports");
        v["public_ipaddr"] = nullptr;
    }
    return v;
}

HttpReply FakeVast::get_one(const HttpRequest& r) {
    std::lock_guard lk(m_);
    FakeMachine* i = live(r.params.at("id"));
    if (!i) return {200, json{{"instances", nullptr}}.dump()};
    ++i->polls;
    return {200, json{{"instances", view(r.params.at("id"))}}.dump()};
}

HttpReply FakeVast::get_all(const HttpRequest& r) {
    if (r.query_params()["owner"] != "me") return fail(400, "invalid_args", "owner=me is required");
    const json list = live_views();
    return {200, json{{"instances_found", list.size()}, {"instances", list}}.dump()};
}

HttpReply FakeVast::destroy(const HttpRequest& r) {
    const std::string& id = r.params.at("id");
    std::lock_guard lk(m_);
    if (!live(id)) return fail(404, "no_such_instance", "Instance " + id + " not found.");
    remove_machine(id);
    return {200, json{{"success", true}, {"msg", "destroying instance " + id + "."}}.dump()};
}

HttpReply FakeVast::key_add(const HttpRequest& r) {
    json b = json::parse(r.body, nullptr, false);
    if (!b.is_object() || !b.contains("ssh_key") || !b["ssh_key"].is_string() ||
        b["ssh_key"].get<std::string>().rfind("ssh-", 0) != 0)
        return fail(400, "invalid_args", "ssh_key must be an OpenSSH public key");
    for (auto& [k, v] : b.items())
        if (k != "ssh_key") return fail(400, "invalid_args", "unknown field " + k);
    std::lock_guard lk(m_);
    json key = {{"id", next_key_++}, {"public_key", b["ssh_key"]}, {"created_at", "2026-11-23"}};
    keys_.push_back(key);
    return {200, json{{"success", true}, {"key", key}}.dump()};
}

HttpReply FakeVast::key_list(const HttpRequest&) {
    std::lock_guard lk(m_);
    return {200, json(keys_).dump()};
}

HttpReply FakeVast::key_delete(const HttpRequest& r) {
    std::lock_guard lk(m_);
    auto it = std::find_if(keys_.begin(), keys_.end(),
                           [&](const json& k) { return k["id"].dump() == r.params.at("id"); });
    if (it == keys_.end()) return fail(404, "no_such_key", "SSH key not found.");
    keys_.erase(it);
    return {200, json{{"success", true}}.dump()};
}

void FakeVast::take(const std::string& ask_id) {
    std::lock_guard lk(m_);
    taken_[ask_id] = true;
}

void FakeVast::take_all_on_rent(bool on) {
    std::lock_guard lk(m_);
    take_all_ = on;
}

void FakeVast::outbid(const std::string& id) { reclaim(id); }

std::vector<json> FakeVast::ssh_keys() const {
    std::lock_guard lk(m_);
    return keys_;
}

std::vector<json> FakeVast::rent_requests() const {
    std::lock_guard lk(m_);
    return rents_;
}

}  // namespace sky::test
