// The fake DigitalOcean API v2. Shapes from digitalocean/openapi (specification/resources/
// droplets, sizes, ssh_keys) and its examples; errors are {"id", "message", "request_id"}.
#include "fakes/digitalocean/fake_digitalocean.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <regex>

#include "fakes/common/host_binding.hpp"
#include "hosts/test_hosts.hpp"

namespace sky::test {

namespace {

using nlohmann::json;

HttpReply error(int status, const std::string& id, const std::string& message) {
    return {status, json{{"id", id},
                         {"message", message},
                         {"request_id", "4d9d8375-3c56-4925-a3e7-eb137fed17e9"}}
                        .dump()};
}

HttpReply unprocessable(const std::string& message) {
    return error(422, "unprocessable_entity", message);
}

// A page of `items` as DigitalOcean pages lists (per_page default 20, max 200).
HttpReply page_of(const std::string& key, const std::vector<json>& items, const HttpRequest& r,
                  const std::string& base) {
    auto q = r.query_params();
    int per_page = 20, page = 1;
    try {
        if (q.count("per_page")) per_page = std::stoi(q["per_page"]);
        if (q.count("page")) page = std::stoi(q["page"]);
    } catch (const std::exception&) {
        return unprocessable("per_page and page must be integers");
    }
    if (per_page < 1 || per_page > 200 || page < 1)
        return unprocessable("per_page must be between 1 and 200");
    json list = json::array();
    const std::size_t first = static_cast<std::size_t>((page - 1) * per_page);
    for (std::size_t i = first; i < items.size() && i < first + per_page; ++i)
        list.push_back(items[i]);
    json links = json::object();
    if (first + per_page < items.size())
        links["pages"] = {
            {"next", fmt::format("{}?page={}&per_page={}", base, page + 1, per_page)},
            {"last", fmt::format("{}?page={}&per_page={}", base,
                                 (items.size() + per_page - 1) / per_page, per_page)}};
    return {200, json{{key, list}, {"links", links}, {"meta", {{"total", items.size()}}}}.dump()};
}

bool valid_tag(const std::string& t) {
    static const std::regex re("^[a-zA-Z0-9_\\-:]{1,255}$");
    return std::regex_match(t, re);
}

bool valid_hostname(const std::string& n) {
    static const std::regex re("^[a-zA-Z0-9]([a-zA-Z0-9.-]{0,253}[a-zA-Z0-9])?$");
    return std::regex_match(n, re);
}

}  // namespace

std::vector<json> FakeDigitalOcean::default_sizes() {
    return {
        {{"slug", "s-2vcpu-4gb"},
         {"memory", 4096},
         {"vcpus", 2},
         {"disk", 80},
         {"transfer", 4.0},
         {"price_monthly", 24.0},
         {"price_hourly", 0.03571},
         {"regions", {"nyc1", "nyc3"}},
         {"available", true},
         {"description", "Basic"},
         {"disk_info", json::array()}},
        {{"slug", "gpu-h100x1-80gb"},
         {"memory", 245760},
         {"vcpus", 20},
         {"disk", 720},
         {"transfer", 15.0},
         {"price_monthly", 4995.36},
         {"price_hourly", 6.74},
         {"regions", {"nyc2", "tor1"}},
         {"available", true},
         {"description", "H100 GPU - 1X"},
         {"gpu_info",
          {{"count", 1}, {"vram", {{"amount", 80}, {"unit", "gib"}}}, {"model", "nvidia_h100"}}}},
        {{"slug", "gpu-h100x8-640gb"},
         {"memory", 1966080},
         {"vcpus", 160},
         {"disk", 2046},
         {"transfer", 60.0},
         {"price_monthly", 35830.08},
         {"price_hourly", 47.6},
         {"regions", {"nyc2"}},
         {"available", true},
         {"description", "H100 GPU - 8X"},
         {"gpu_info",
          {{"count", 8}, {"vram", {{"amount", 80}, {"unit", "gib"}}}, {"model", "nvidia_h100"}}}},
        {{"slug", "gpu-l40sx1-48gb"},
         {"memory", 65536},
         {"vcpus", 8},
         {"disk", 500},
         {"transfer", 10.0},
         {"price_monthly", 1168.08},
         {"price_hourly", 1.57},
         {"regions", {"tor1"}},
         {"available", true},
         {"description", "L40S GPU - 1X"},
         {"gpu_info",
          {{"count", 1}, {"vram", {{"amount", 48}, {"unit", "gib"}}}, {"model", "nvidia_l40s"}}}},
    };
}

FakeDigitalOcean::FakeDigitalOcean(FakeDigitalOceanOptions options)
    : RestFake("cloudflare", "/v2", options.hosts), options_(std::move(options)) {
    if (options_.sizes.empty()) options_.sizes = default_sizes();
    auto route = guarded_routes(http_, this, &FakeDigitalOcean::refuse);
    route("GET", "/v2/sizes", &FakeDigitalOcean::handle_sizes);
    route("GET", "/v2/account/keys", &FakeDigitalOcean::handle_keys_list);
    route("POST", "/v2/account/keys", &FakeDigitalOcean::handle_keys_create);
    route("DELETE", "/v2/account/keys/{key}", &FakeDigitalOcean::handle_keys_delete);
    route("POST", "/v2/droplets", &FakeDigitalOcean::handle_create);
    route("GET", "/v2/droplets", &FakeDigitalOcean::handle_list);
    route("DELETE", "/v2/droplets", &FakeDigitalOcean::handle_delete_by_tag);
    route("GET", "/v2/droplets/{id}", &FakeDigitalOcean::handle_get);
    route("DELETE", "/v2/droplets/{id}", &FakeDigitalOcean::handle_delete);
    route("POST", "/v2/tags", &FakeDigitalOcean::handle_tag_create);
    route("GET", "/v2/tags", &FakeDigitalOcean::handle_tag_list);
    route("GET", "/v2/tags/{tag}", &FakeDigitalOcean::handle_tag_get);
    route("DELETE", "/v2/tags/{tag}", &FakeDigitalOcean::handle_tag_delete);
    route("POST", "/v2/firewalls", &FakeDigitalOcean::handle_firewall_create);
    route("GET", "/v2/firewalls", &FakeDigitalOcean::handle_firewall_list);
    route("GET", "/v2/firewalls/{id}", &FakeDigitalOcean::handle_firewall_get);
    route("DELETE", "/v2/firewalls/{id}", &FakeDigitalOcean::handle_firewall_delete);
    nft_ = options_.hosts && options_.enforce_firewalls &&
           run_command({"nft", "--version"}).status == 0;
}

FakeDigitalOcean::~FakeDigitalOcean() {
    std::lock_guard lk(m_);
    remove_all();
    firewalls_.clear();
    try {
        enforce_locked();  // every host open again
    } catch (...) {
    }
}

void FakeDigitalOcean::set_capacity(const std::string& key, int droplets) {
    std::lock_guard lk(m_);
    capacity_[key] = droplets;
}

void FakeDigitalOcean::set_available(const std::string& slug, bool available) {
    std::lock_guard lk(m_);
    for (auto& s : options_.sizes)
        if (s["slug"] == slug) s["available"] = available;
}

void FakeDigitalOcean::rate_limit(int count) {
    HttpFault f;
    f.reply = error(429, "too_many_requests", "API Rate limit exceeded.");
    f.reply.headers = {{"ratelimit-limit", "5000"},
                       {"ratelimit-remaining", "0"},
                       {"ratelimit-reset", "1"},
                       {"Retry-After", "0"}};
    f.count = count;
    http_.inject_fault(f);
}

std::optional<HttpReply> FakeDigitalOcean::refuse(const HttpRequest& r) {
    if (!has_key(r, options_.token, false)) {
        std::lock_guard lk(m_);
        ++auth_failures_;
        return error(401, "Unauthorized", "Unable to authenticate you");
    }
    if ((r.method == "POST" || r.method == "PUT") && !json_declared(r))
        return error(415, "unsupported_media_type",
                     "Content-Type must be application/json for this endpoint");
    return std::nullopt;
}

HttpReply FakeDigitalOcean::handle_sizes(const HttpRequest& r) {
    std::lock_guard lk(m_);
    return page_of("sizes", options_.sizes, r, "https://api.digitalocean.com/v2/sizes");
}

HttpReply FakeDigitalOcean::handle_keys_list(const HttpRequest& r) {
    std::lock_guard lk(m_);
    return page_of("ssh_keys", keys_, r, "https://api.digitalocean.com/v2/account/keys");
}

HttpReply FakeDigitalOcean::handle_keys_create(const HttpRequest& r) {
    json b = json::parse(r.body, nullptr, false);
    if (!b.is_object()) return error(400, "bad_request", "unparsable JSON body");
    for (auto& [k, v] : b.items())
        if (k != "name" && k != "public_key")
            return unprocessable(fmt::format("unknown attribute {} for an SSH key", k));
    if (!b.contains("name") || !b["name"].is_string() || b["name"].get<std::string>().empty())
        return unprocessable("Name can't be blank");
    if (!b.contains("public_key") || !b["public_key"].is_string())
        return unprocessable("Public key can't be blank");
    std::string pub = b["public_key"];
    if (pub.rfind("ssh-", 0) != 0 || pub.find(' ') == std::string::npos)
        return unprocessable("Public key is invalid");
    std::lock_guard lk(m_);
    for (const auto& k : keys_)
        if (k["public_key"] == pub)
            return unprocessable("SSH Key is already in use on your account");
    json key = {
        {"id", next_key_++},
        {"fingerprint", fmt::format("3b:16:bf:e4:8b:00:8b:b8:59:8c:a9:d3:f0:19:{:02x}:{:02x}",
                                    next_key_ % 256, (next_key_ / 256) % 256)},
        {"public_key", pub},
        {"name", b["name"]}};
    keys_.push_back(key);
    return {201, json{{"ssh_key", key}}.dump()};
}

HttpReply FakeDigitalOcean::handle_keys_delete(const HttpRequest& r) {
    std::lock_guard lk(m_);
    const std::string want = r.params.at("key");
    auto it = std::find_if(keys_.begin(), keys_.end(), [&](const json& k) {
        return std::to_string(k["id"].get<long long>()) == want || k["fingerprint"] == want;
    });
    if (it == keys_.end())
        return error(404, "not_found", "The resource you were accessing could not be found.");
    keys_.erase(it);
    return {204, ""};
}

HttpReply FakeDigitalOcean::handle_create(const HttpRequest& r) {
    json b = json::parse(r.body, nullptr, false);
    if (!b.is_object()) return error(400, "bad_request", "unparsable JSON body");
    static const std::set<std::string> known = {"name",
                                                "names",
                                                "region",
                                                "size",
                                                "image",
                                                "ssh_keys",
                                                "backups",
                                                "backup_policy",
                                                "ipv6",
                                                "monitoring",
                                                "tags",
                                                "user_data",
                                                "private_networking",
                                                "volumes",
                                                "vpc_uuid",
                                                "with_droplet_agent"};
    for (auto& [k, v] : b.items())
        if (!known.count(k)) return unprocessable(fmt::format("unknown attribute: {}", k));
    if (!b.contains("size") || !b["size"].is_string()) return unprocessable("size is required");
    if (!b.contains("image") || !(b["image"].is_string() || b["image"].is_number_integer()))
        return unprocessable("image is required");
    if (b.contains("names")) return unprocessable("this fake creates one droplet per request");
    if (!b.contains("name") || !b["name"].is_string() || !valid_hostname(b["name"]))
        return unprocessable("Name is invalid: only a-z, 0-9, . and - are allowed");
    for (const char* k :
         {"ipv6", "monitoring", "backups", "private_networking", "with_droplet_agent"})
        if (b.contains(k) && !b[k].is_boolean())
            return unprocessable(std::string(k) + " must be a boolean");
    if (b.contains("user_data")) {
        if (!b["user_data"].is_string()) return unprocessable("user_data must be a string");
        if (b["user_data"].get<std::string>().size() > 64 * 1024)
            return unprocessable("user_data is limited to 64 KiB");
    }
    if (b.contains("tags")) {
        if (!b["tags"].is_array()) return unprocessable("tags must be an array of strings");
        for (const auto& t : b["tags"])
            if (!t.is_string() || !valid_tag(t))
                return unprocessable(
                    "Tag names may contain only letters, numbers, colons, dashes and underscores");
    }
    const std::string size_slug = b["size"];
    auto size = std::find_if(options_.sizes.begin(), options_.sizes.end(),
                             [&](const json& s) { return s["slug"] == size_slug; });
    if (size == options_.sizes.end() || options_.unknown_sizes.count(size_slug))
        return unprocessable("You specified an invalid size for Droplet creation.");
    if (!size->value("available", true))
        return unprocessable(
            "The requested size is not available in this region at this time: there is not "
            "enough capacity. Please try another size or region.");
    if (b.contains("region") && !b["region"].is_string())
        return unprocessable("region must be a string");
    const std::string region = b.contains("region") ? b["region"].get<std::string>()
                                                    : (*size)["regions"].at(0).get<std::string>();
    const auto& regions = (*size)["regions"];
    if (std::find(regions.begin(), regions.end(), region) == regions.end())
        return unprocessable("Size is not available in this region.");

    std::lock_guard lk(m_);
    std::vector<std::string> authorized;
    if (b.contains("ssh_keys")) {
        if (!b["ssh_keys"].is_array()) return unprocessable("ssh_keys must be an array");
        for (const auto& want : b["ssh_keys"]) {
            auto it = std::find_if(keys_.begin(), keys_.end(), [&](const json& k) {
                return (want.is_number_integer() && k["id"] == want) ||
                       (want.is_string() && k["fingerprint"] == want);
            });
            if (it == keys_.end())
                return unprocessable("ssh_keys contains an invalid key id or fingerprint");
            authorized.push_back((*it)["public_key"]);
        }
    }
    for (const std::string& key : {size_slug + "@" + region, size_slug}) {
        auto c = capacity_.find(key);
        if (c == capacity_.end()) continue;
        if (c->second <= 0)
            return unprocessable(
                "The requested size is not available in this region at this time: there is "
                "not enough capacity. Please try another size or region.");
        --c->second;
    }
    // A droplet's tags may be new: its create makes them (droplet_create.yml).
    for (const auto& t : b.value("tags", json::array())) tags_.insert(t.get<std::string>());
    const std::string id = std::to_string(next_id_++);
    const int n = static_cast<int>(machines_.size()) + 2;
    FakeMachine* made = add_machine(id, b.value("user_data", std::string()), authorized,
                                    fmt::format("203.0.113.{}", n), 22);
    if (!made)
        return unprocessable(
            "The requested size is not available in this region at this time: there is "
            "not enough capacity. Please try another size or region.");
    FakeMachine& d = *made;
    d.private_ip = hosts_ ? d.ip : fmt::format("10.116.0.{}", n);
    d.body = {
        {"id", std::stoll(id)},
        {"name", b["name"]},
        {"memory", (*size)["memory"]},
        {"vcpus", (*size)["vcpus"]},
        {"disk", (*size)["disk"]},
        {"locked", false},
        {"status", "new"},
        {"kernel", nullptr},
        {"created_at", "2026-11-23T10:00:00Z"},
        {"features", b.value("monitoring", false) ? json::array({"monitoring"}) : json::array()},
        {"backup_ids", json::array()},
        {"snapshot_ids", json::array()},
        {"image", {{"slug", b["image"]}, {"distribution", "Ubuntu"}}},
        {"volume_ids", json::array()},
        {"size", *size},
        {"size_slug", size_slug},
        {"networks", {{"v4", json::array()}, {"v6", json::array()}}},
        {"region", {{"slug", region}, {"name", region}, {"available", true}}},
        {"tags", b.value("tags", json::array())},
        {"vpc_uuid", "760e09ef-dc84-11e8-981e-3cfdfeaae000"}};
    enforce_locked();  // its firewalls (by tag) hold before anything on it listens
    return {202, json{{"droplet", d.body},
                      {"links",
                       {{"actions",
                         {{{"id", 7515},
                           {"rel", "create"},
                           {"href", "https://api.digitalocean.com/v2/actions/7515"}}}}}}}
                     .dump()};
}

json FakeDigitalOcean::view(const std::string& id) const {
    const FakeMachine& d = machines_.at(id);
    json v = d.body;
    if (d.polls > options_.gets_until_active) {
        v["status"] = "active";
        v["networks"]["v4"] = json::array({{{"ip_address", d.private_ip},
                                            {"netmask", "255.255.240.0"},
                                            {"gateway", "10.116.0.1"},
                                            {"type", "private"}},
                                           {{"ip_address", d.ip},
                                            {"netmask", "255.255.255.0"},
                                            {"gateway", "203.0.113.1"},
                                            {"type", "public"}}});
    }
    return v;
}

HttpReply FakeDigitalOcean::handle_get(const HttpRequest& r) {
    const std::string id = r.params.at("id");
    if (id.empty() || !std::all_of(id.begin(), id.end(), ::isdigit))
        return error(404, "not_found", "The resource you were accessing could not be found.");
    std::lock_guard lk(m_);
    FakeMachine* d = live(id);
    if (!d) return error(404, "not_found", "The resource you were accessing could not be found.");
    ++d->polls;
    return {200, json{{"droplet", view(id)}}.dump()};
}

HttpReply FakeDigitalOcean::handle_list(const HttpRequest& r) {
    auto q = r.query_params();
    std::lock_guard lk(m_);
    std::vector<json> items;
    for (auto& [id, d] : machines_) {
        if (d.gone) continue;
        if (q.count("tag_name")) {
            const auto& tags = d.body["tags"];
            if (std::find(tags.begin(), tags.end(), q["tag_name"]) == tags.end()) continue;
        }
        items.push_back(view(id));
    }
    return page_of("droplets", items, r, "https://api.digitalocean.com/v2/droplets");
}

void FakeDigitalOcean::delete_locked(const std::string& id) {
    remove_machine(id);
    enforce_locked();
}

HttpReply FakeDigitalOcean::handle_delete(const HttpRequest& r) {
    const std::string id = r.params.at("id");
    std::lock_guard lk(m_);
    if (!live(id))
        return error(404, "not_found", "The resource you were accessing could not be found.");
    delete_locked(id);
    return {204, ""};
}

HttpReply FakeDigitalOcean::handle_delete_by_tag(const HttpRequest& r) {
    auto q = r.query_params();
    if (!q.count("tag_name") || q["tag_name"].empty())
        return unprocessable("tag_name is required to delete droplets by tag");
    std::lock_guard lk(m_);
    for (auto& [id, d] : machines_) {
        if (d.gone) continue;
        const auto& tags = d.body["tags"];
        if (std::find(tags.begin(), tags.end(), q["tag_name"]) != tags.end()) delete_locked(id);
    }
    return {204, ""};
}

// A tag as the API shows one (tags.yml): its name and what it is on.
HttpReply FakeDigitalOcean::handle_tag_create(const HttpRequest& r) {
    json b = json::parse(r.body, nullptr, false);
    if (!b.is_object()) return error(400, "bad_request", "unparsable JSON body");
    for (auto& [k, v] : b.items())
        if (k != "name") return unprocessable(fmt::format("unknown attribute {} for a tag", k));
    if (!b.contains("name") || !b["name"].is_string() || !valid_tag(b["name"]))
        return error(400, "bad_request",
                     "Error validating resource tag: tag names may contain only letters, numbers, "
                     "colons, dashes and underscores, at most 255");
    std::lock_guard lk(m_);
    const std::string name = b["name"];
    tags_.insert(name);
    return {201, json{{"tag", tag_view(name)}}.dump()};
}

json FakeDigitalOcean::tag_view(const std::string& name) const {
    int droplets = 0;
    for (const auto& [id, d] : machines_) {
        if (d.gone) continue;
        const auto& tags = d.body["tags"];
        if (std::find(tags.begin(), tags.end(), name) != tags.end()) ++droplets;
    }
    return {{"name", name},
            {"resources",
             {{"count", droplets},
              {"droplets", {{"count", droplets}}},
              {"images", {{"count", 0}}},
              {"volumes", {{"count", 0}}},
              {"volume_snapshots", {{"count", 0}}},
              {"databases", {{"count", 0}}}}}};
}

HttpReply FakeDigitalOcean::handle_tag_get(const HttpRequest& r) {
    std::lock_guard lk(m_);
    const std::string name = r.params.at("tag");
    if (!tags_.count(name))
        return error(404, "not_found", "The resource you were accessing could not be found.");
    return {200, json{{"tag", tag_view(name)}}.dump()};
}

HttpReply FakeDigitalOcean::handle_tag_list(const HttpRequest& r) {
    std::lock_guard lk(m_);
    std::vector<json> items;
    for (const auto& t : tags_) items.push_back(tag_view(t));
    return page_of("tags", items, r, "https://api.digitalocean.com/v2/tags");
}

// Deleting a tag untags every resource that had it (tags_delete.yml): droplets and firewalls.
HttpReply FakeDigitalOcean::handle_tag_delete(const HttpRequest& r) {
    std::lock_guard lk(m_);
    const std::string name = r.params.at("tag");
    if (!tags_.erase(name))
        return error(404, "not_found", "The resource you were accessing could not be found.");
    auto untag = [&](json& tags) {
        if (!tags.is_array()) return;
        json kept = json::array();
        for (const auto& t : tags)
            if (t != name) kept.push_back(t);
        tags = kept;
    };
    for (auto& [id, d] : machines_) untag(d.body["tags"]);
    for (auto& f : firewalls_) {
        untag(f["tags"]);
        for (const char* k : {"inbound_rules", "outbound_rules"})
            for (auto& rule : f[k])
                for (const char* where : {"sources", "destinations"})
                    if (rule.contains(where) && rule[where].contains("tags"))
                        untag(rule[where]["tags"]);
    }
    enforce_locked();
    return {204, ""};
}

std::vector<std::string> FakeDigitalOcean::tags() const {
    std::lock_guard lk(m_);
    return {tags_.begin(), tags_.end()};
}

std::vector<json> FakeDigitalOcean::all_droplets() const {
    std::lock_guard lk(m_);
    std::vector<json> out;
    for (auto& [id, d] : machines_) {
        json v = view(id);
        v["deleted"] = d.gone;
        out.push_back(v);
    }
    return out;
}

std::vector<json> FakeDigitalOcean::keys() const {
    std::lock_guard lk(m_);
    return keys_;
}

std::string FakeDigitalOcean::user_data(const std::string& id) const {
    std::lock_guard lk(m_);
    auto it = machines_.find(id);
    return it == machines_.end() ? "" : it->second.user_data;
}

int FakeDigitalOcean::auth_failures() const {
    std::lock_guard lk(m_);
    return auth_failures_;
}

}  // namespace sky::test
