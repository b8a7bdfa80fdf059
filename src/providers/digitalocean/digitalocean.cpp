// sky::DigitalOcean as a cloud adapter over DigitalOcean's API v2 (digitalocean/openapi): GET
// /sizes for offers (GPU facts from gpu_info, price_hourly), POST /account/keys for the pool's
// key, POST /tags for the pool's tag (a firewall may name only a tag that exists), POST
// /firewalls for the pool's cloud firewall (by that tag), POST /droplets with user_data and
// tags, GET /droplets/{id}, DELETE /droplets/{id}, GET /droplets?tag_name= for the sweep. The
// pool's life is the cloud layer's (providers/cloud).
#include "providers/digitalocean/digitalocean.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>

#include "catalog/names.hpp"
#include "http/client_address.hpp"
#include "providers/cloud/refusal.hpp"
#include "providers/digitalocean/provider.hpp"
#include "providers/rest/descriptor.hpp"
#include "providers/rest/json_api.hpp"
#include "util/env.hpp"
#include "util/text.hpp"

namespace sky::detail {

namespace {

using nlohmann::json;
using rest::number_of;
using rest::Repeat;
using rest::text_of;

constexpr const char* kProvider = "DigitalOcean";
constexpr int kMaxPages = 50;  // 200 items a page: far more than any account holds
// Every port of a protocol in a firewall rule: "0", as firewall_rule.yml says (a port, a range
// or "0"); the API refuses the word "all" with a 422.
constexpr const char* kAllPorts = "0";

std::optional<ProviderErrorInfo> parse_do_error(const HttpResponse& r) {
    json j = json::parse(r.body);
    if (!j.is_object() || !j.contains("message")) return std::nullopt;
    return ProviderErrorInfo{text_of(j, "id"), text_of(j, "message")};
}

// Whether a create that failed may have been carried out all the same: 422 (already there: a
// retry after a lost answer), or an outcome the client cannot know.
bool maybe_made(const HttpError& e) { return e.status() == 422 || e.outcome_unknown(); }

std::string error_text(const std::exception& e) {
    if (auto* h = dynamic_cast<const HttpError*>(&e); h && !h->provider_message().empty())
        return fmt::format("HTTP {} {}: {}", h->status(), h->code(), h->provider_message());
    return e.what();
}

// DigitalOcean's answer for a size it does not know (retired or renamed): the next offer.
bool is_unknown_size(const HttpError& e) {
    return e.status() == 422 &&
           to_lower(e.provider_message()).find("invalid size") != std::string::npos;
}

// DigitalOcean's answers that mean "not this size here, now": the size is not sold in the
// region or has no capacity, or the account's droplet limit is reached (HTTP 422).
bool is_capacity(const HttpError& e) {
    if (e.status() != 422) return false;
    const std::string m = to_lower(e.provider_message());
    for (const char* w : {"not available", "unavailable", "capacity", "droplet limit", "exceed",
                          "out of stock", "sold out"})
        if (m.find(w) != std::string::npos) return true;
    return false;
}

std::string pool_of_tags(const json& tags) {
    if (!tags.is_array()) return {};
    const std::string prefix = "sky-pool-";
    for (const auto& t : tags)
        if (t.is_string() && t.get<std::string>().rfind(prefix, 0) == 0)
            return t.get<std::string>().substr(prefix.size());
    return {};
}

CloudInstance instance_from(const json& d) {
    CloudInstance i;
    i.id = text_of(d, "id");
    const std::string status = text_of(d, "status");
    if (status == "new")
        i.state = CloudInstance::State::pending;
    else if (status == "active")
        i.state = CloudInstance::State::running;
    else if (status == "archive")
        i.state = CloudInstance::State::gone;
    else
        i.state = CloudInstance::State::stopping;  // off
    if (i.state != CloudInstance::State::running && i.state != CloudInstance::State::pending)
        i.reason = "droplet status " + status;
    if (d.contains("networks") && d["networks"].is_object() && d["networks"].contains("v4") &&
        d["networks"]["v4"].is_array())
        for (const auto& n : d["networks"]["v4"]) {
            const std::string type = text_of(n, "type");
            if (type == "public" && i.public_ip.empty()) i.public_ip = text_of(n, "ip_address");
            if (type == "private" && i.private_ip.empty()) i.private_ip = text_of(n, "ip_address");
        }
    i.instance_type = text_of(d, "size_slug");
    if (i.instance_type.empty() && d.contains("size")) i.instance_type = text_of(d["size"], "slug");
    i.pool_id = pool_of_tags(d.value("tags", json::array()));
    return i;
}

class DigitalOceanAdapter final : public CloudAdapter {
public:
    explicit DigitalOceanAdapter(const DigitalOcean& cfg) : region_(cfg.region) {
        const std::string token = env_or("DIGITALOCEAN_TOKEN");
        if (token.empty())
            throw ConfigError(
                "DigitalOcean: no credentials: set DIGITALOCEAN_TOKEN to a personal access token "
                "with read and write scope");
        api_ = std::make_unique<rest::JsonApi>(rest::bearer_config(
            kProvider,
            rest::choose_endpoint(cfg.endpoint, "DigitalOcean{.endpoint}", "DIGITALOCEAN_API_URL",
                                  kDigitalOceanDefaultUrl),
            token, parse_do_error));
        image_ = env_or("SKY_DIGITALOCEAN_IMAGE");
    }

    std::string name() const override { return "digitalocean"; }
    // Empty: each offer names its region (GPU sizes are sold in a few regions only); the
    // configured region is preferred where the size is sold (see live_offers).
    std::string region() const override { return {}; }

    std::vector<Offer> live_offers(const Catalog& catalog, const SelectionRequest&,
                                   const std::function<void(Event)>& emit) override {
        api_->notice_endpoint("token");
        std::vector<json> sizes;
        try {
            for_each_page("/sizes", "sizes", [&](const json& s) { sizes.push_back(s); });
        } catch (const std::exception& e) {
            emit(ErrorEvent{
                "DigitalOcean: sizes unavailable, using the catalog's offers: " + error_text(e),
                std::nullopt});
            return {};
        }
        if (!sizes.empty() && std::none_of(sizes.begin(), sizes.end(), [](const json& s) {
                return s.value("available", true);
            }))
            // DigitalOcean answered, and it sells no size now: the catalog's would be refused.
            throw CapacityError(fmt::format(
                "DigitalOcean: none of the {} sizes it lists is available now (GET /v2/sizes)",
                sizes.size()));
        const std::string today = rest::today_utc();
        std::vector<Offer> out;
        for (const auto& s : sizes) {
            if (!s.value("available", true)) continue;
            Offer o;
            o.provider = "digitalocean";
            o.instance_type = text_of(s, "slug");
            auto price = number_of(s, "price_hourly");
            if (o.instance_type.empty() || !price || *price <= 0) continue;
            o.on_demand_price = *price;
            o.spot_price.reset();
            o.spot_available = false;  // DigitalOcean sells no spot capacity
            o.prices_date = today;
            o.vcpus = rest::int_of(s, "vcpus", 0, 1 << 20).value_or(0);
            o.memory_gb = number_of(s, "memory").value_or(0) / 1024.0;  // MB
            if (s.contains("gpu_info") && s["gpu_info"].is_object()) {
                const json& g = s["gpu_info"];
                const int count = rest::int_of(g, "count", 0, 1 << 16).value_or(0);
                double vram_gb = 0;
                if (g.contains("vram")) vram_gb = number_of(g["vram"], "amount").value_or(0);
                std::string model = text_of(g, "model");
                std::optional<Accelerator> acc =
                    accelerator_from_device_name(model, vram_gb * 1024.0, count);
                if (!acc) {
                    // A model sky does not know by name: the catalog's facts for the slug.
                    for (const auto& c : catalog.offers("digitalocean"))
                        if (c.instance_type == o.instance_type && !c.accelerator.empty()) {
                            acc = Accelerator{};
                            acc->name = c.accelerator;
                        }
                }
                if (!acc || count < 1) continue;  // a GPU size sky cannot name: not offered
                o.accelerator = acc->name;
                o.accelerator_count = count;
                o.gpu_memory_gb = vram_gb;
            }
            std::vector<std::string> regions;
            if (s.contains("regions") && s["regions"].is_array())
                for (const auto& r : s["regions"])
                    if (r.is_string()) regions.push_back(r.get<std::string>());
            // The configured region where the size is sold there, else every region that sells it.
            if (std::find(regions.begin(), regions.end(), region_) != regions.end())
                regions = {region_};
            for (const auto& r : regions) {
                o.region = r;
                out.push_back(o);
            }
        }
        return out;
    }

    void create_infra(const InfraRequest& r, const std::function<void(Event)>& emit) override {
        std::lock_guard lk(m_);
        if (!key_id_.empty()) {
            ensure_tag(r.pool_id);
            ensure_firewall(r, emit);
            return;
        }
        const std::string wanted = blob_of(r.ssh_public_key);
        auto find_key = [&] {
            for_each_page("/account/keys", "ssh_keys", [&](const json& k) {
                if (key_id_.empty() && blob_of(text_of(k, "public_key")) == wanted)
                    key_id_ = text_of(k, "id");
            });
        };
        try {
            json k =
                api_->call("POST", "/account/keys",
                           json{{"name", r.name}, {"public_key", r.ssh_public_key}}, Repeat::once);
            if (k.is_object()) key_id_ = text_of(k.value("ssh_key", json::object()), "id");
        } catch (const HttpError& e) {
            // 422 "SSH Key is already in use on your account": a second call, or a retry after
            // a lost answer. No answer, or a server error: the key may have been made anyway.
            // Either way, find it by its public key.
            if (!maybe_made(e)) fail("POST /account/keys", e);
            find_key();
            if (key_id_.empty()) fail("POST /account/keys", e);
        } catch (const std::exception& e) {
            // An answer that is not JSON: the key was made, its answer spoiled.
            find_key();
            if (key_id_.empty())
                throw ProvisionError(std::string("DigitalOcean: POST /account/keys: ") + e.what());
        }
        if (key_id_.empty()) find_key();  // an answer without the key's id
        if (key_id_.empty())
            throw ProvisionError("DigitalOcean: POST /account/keys answered without a key id");
        ensure_tag(r.pool_id);
        ensure_firewall(r, emit);
    }

    std::string launch(const LaunchRequest& r) override {
        std::string key;
        {
            std::lock_guard lk(m_);
            key = key_id_;
        }
        json body = {{"name", fmt::format("{}-n{}", r.name, r.node)},
                     {"region", r.offer.region.empty() ? region_ : r.offer.region},
                     {"size", r.offer.instance_type},
                     {"image", image_for(r.offer)},
                     {"user_data", r.boot_script},
                     {"tags", json::array({"sky", digitalocean_pool_tag(r.pool_id)})},
                     {"monitoring", false},
                     {"ipv6", false}};
        if (!key.empty()) {
            // Ids are integers in DigitalOcean's schema (fingerprints are strings).
            try {
                body["ssh_keys"] = json::array({std::stoll(key)});
            } catch (const std::exception&) {
                body["ssh_keys"] = json::array({key});
            }
        }
        json answer;
        try {
            answer = api_->call("POST", "/droplets", body, Repeat::once);
        } catch (const HttpError& e) {
            if (is_unknown_size(e))
                throw UnknownInstanceTypeError("DigitalOcean: " + error_text(e));
            if (is_capacity(e)) throw CapacityError("DigitalOcean: " + error_text(e));
            // No answer, one cut short, or a server error: the droplet may have been made.
            if (e.outcome_unknown())
                throw LaunchAnswerLostError("DigitalOcean: POST /droplets: " + error_text(e));
            fail("POST /droplets", e);
        } catch (const Error& e) {  // a 2xx whose body is not JSON
            throw LaunchAnswerLostError(std::string("DigitalOcean: ") + e.what());
        }
        const json droplet = answer.is_object() ? answer.value("droplet", json::object()) : json();
        const std::string id = text_of(droplet, "id");
        if (id.empty())
            throw LaunchAnswerLostError("DigitalOcean: POST /droplets answered without an id");
        return id;
    }

    std::vector<CloudInstance> describe(const std::vector<std::string>& ids) override {
        std::vector<CloudInstance> out;
        for (const auto& id : ids) {
            try {
                json d = api_->call("GET", "/droplets/" + url_encode(id));
                CloudInstance i = instance_from(d.value("droplet", json::object()));
                i.id = id;
                out.push_back(std::move(i));
            } catch (const HttpError& e) {
                if (e.status() != 404) throw;
                out.push_back(rest::unknown_instance(id, kProvider));
            }
        }
        return out;
    }

    void terminate(const std::vector<std::string>& ids) override {
        std::string failures;
        for (const auto& id : ids) {
            try {
                (void)api_->send("DELETE", "/droplets/" + url_encode(id));
            } catch (const HttpError& e) {
                if (e.status() == 404) continue;  // already gone
                failures += (failures.empty() ? "" : "; ") + id + ": " + error_text(e);
            }
        }
        if (!failures.empty())
            throw ProvisionError("DigitalOcean: DELETE /droplets failed: " + failures);
    }

    std::vector<CloudInstance> list(std::string_view pool_id) override {
        const std::string tag =
            pool_id.empty() ? std::string("sky") : digitalocean_pool_tag(pool_id);
        std::vector<CloudInstance> out;
        for_each_page("/droplets?tag_name=" + url_encode(tag), "droplets", [&](const json& d) {
            CloudInstance i = instance_from(d);
            if (i.state != CloudInstance::State::gone) out.push_back(std::move(i));
        });
        return out;
    }

    void delete_infra(std::string_view pool_id) noexcept override {
        std::lock_guard lk(m_);
        delete_firewall(pool_id);
        try {
            std::vector<std::string> ids;
            if (!key_id_.empty()) {
                ids.push_back(key_id_);
            } else {
                const std::string name = "sky-" + std::string(pool_id);
                for_each_page("/account/keys", "ssh_keys", [&](const json& k) {
                    if (text_of(k, "name") == name) ids.push_back(text_of(k, "id"));
                });
            }
            for (const auto& id : ids) {
                try {
                    (void)api_->send("DELETE", "/account/keys/" + url_encode(id));
                } catch (const HttpError& e) {
                    if (e.status() != 404) continue;
                }
                if (id == key_id_) key_id_.clear();
            }
        } catch (...) {
        }
        delete_tag(pool_id);
    }

    // The account key, the cloud firewall and the pool's tag, each found by its name as `sky gc`
    // finds them (the tag only once no droplet holds it: until then it is what finds them).
    std::vector<std::string> infra_left(std::string_view pool_id) noexcept override {
        std::vector<std::string> left;
        const std::string name = "sky-" + std::string(pool_id);
        auto each_named = [&](const char* what, const char* path, const char* key) {
            try {
                for_each_page(path, key, [&](const json& k) {
                    if (text_of(k, "name") == name)
                        left.push_back(fmt::format("{} {} ({})", what, text_of(k, "id"), name));
                });
            } catch (const std::exception& e) {
                left.push_back(fmt::format("{} {} (cannot tell: {})", what, name, error_text(e)));
            } catch (...) {
            }
        };
        each_named("account key", "/account/keys", "ssh_keys");
        each_named("cloud firewall", "/firewalls", "firewalls");
        try {
            const std::string tag = digitalocean_pool_tag(pool_id);
            if (tag_exists(tag) && list(pool_id).empty()) left.push_back("tag " + tag);
        } catch (const std::exception& e) {
            left.push_back(fmt::format("tag {} (cannot tell: {})", digitalocean_pool_tag(pool_id),
                                       error_text(e)));
        } catch (...) {
        }
        return left;
    }

    CloudLogin login() const override {
        CloudLogin l;
        l.user = "root";
        // A powered-off droplet is still billed: powering off saves nothing, `sky gc` deletes.
        l.power_off_on_expiry = false;
        l.rotate_host_key = true;  // user_data is readable at 169.254.169.254/metadata/v1
        l.boot_wait = std::chrono::seconds(300);
        // An account key is never held by a droplet: a short wait rides out a failed call.
        l.infra_wait = std::chrono::seconds(30);
        return l;
    }

private:
    // The pool's cloud firewall, made before any droplet and applied by the pool's tag, so no
    // droplet of the pool is ever without it: SSH from this client alone (SKY_CLIENT_CIDR, else
    // its address as checkip sees it, else anywhere with a notice), every port and protocol from
    // the pool's own droplets, nothing else in; anything out. A retried create finds the one
    // made before by its name. Caller holds m_.
    void ensure_firewall(const InfraRequest& r, const std::function<void(Event)>& emit) {
        if (!firewall_id_.empty()) return;
        const std::string name = r.name;
        for_each_page("/firewalls", "firewalls", [&](const json& f) {
            if (firewall_id_.empty() && text_of(f, "name") == name) firewall_id_ = text_of(f, "id");
        });
        if (!firewall_id_.empty()) return;
        std::optional<std::string> cidr = client_cidr_from_env();
        if (!cidr && api_->config().endpoint.source == "default") cidr = detect_client_cidr();
        json ssh_from = cidr ? json::array({*cidr}) : json::array({"0.0.0.0/0", "::/0"});
        if (!cidr) {
            const std::string text =
                "DigitalOcean: notice: SSH (port 22) of this pool's droplets is open to every "
                "address, since this client's public address is unknown; set SKY_CLIENT_CIDR "
                "(e.g. 203.0.113.7/32) to allow only it";
            std::fprintf(stderr, "sky: %s\n",
                         text.substr(std::string("DigitalOcean: ").size()).c_str());
            emit(ErrorEvent{text, std::nullopt});
        }
        const std::string tag = digitalocean_pool_tag(r.pool_id);
        const json members = {{"tags", json::array({tag})}};
        const json anywhere = {{"addresses", json::array({"0.0.0.0/0", "::/0"})}};
        json body = {
            {"name", name},
            {"tags", json::array({tag})},
            {"inbound_rules",
             json::array(
                 {{{"protocol", "tcp"}, {"ports", "22"}, {"sources", {{"addresses", ssh_from}}}},
                  {{"protocol", "tcp"}, {"ports", kAllPorts}, {"sources", members}},
                  {{"protocol", "udp"}, {"ports", kAllPorts}, {"sources", members}},
                  {{"protocol", "icmp"}, {"sources", members}}})},
            {"outbound_rules",
             json::array({{{"protocol", "tcp"}, {"ports", kAllPorts}, {"destinations", anywhere}},
                          {{"protocol", "udp"}, {"ports", kAllPorts}, {"destinations", anywhere}},
                          {{"protocol", "icmp"}, {"destinations", anywhere}}})}};
        auto find_firewall = [&] {
            for_each_page("/firewalls", "firewalls", [&](const json& f) {
                if (firewall_id_.empty() && text_of(f, "name") == name)
                    firewall_id_ = text_of(f, "id");
            });
        };
        json answer;
        try {
            answer = api_->call("POST", "/firewalls", body, Repeat::once);
        } catch (const HttpError& e) {
            // No answer, or a server error: the firewall may have been made; find it by name.
            if (!maybe_made(e)) fail("POST /firewalls", e);
            find_firewall();
            if (firewall_id_.empty()) fail("POST /firewalls", e);
            return;
        } catch (const std::exception& e) {
            // An answer that is not JSON: the firewall was made, its answer spoiled.
            find_firewall();
            if (firewall_id_.empty())
                throw ProvisionError(std::string("DigitalOcean: POST /firewalls: ") + e.what());
            return;
        }
        if (answer.is_object())
            firewall_id_ = text_of(answer.value("firewall", json::object()), "id");
        if (firewall_id_.empty()) find_firewall();  // an answer without the firewall's id
        if (firewall_id_.empty())
            throw ProvisionError("DigitalOcean: POST /firewalls answered without a firewall id");
    }

    // The pool's tag, made before anything names it: a firewall may name only a tag that exists
    // (existing_tags_array.yml), while a droplet's create would make it too late. Making one that
    // exists is not an error; an answer lost or refused is checked by reading the tag back.
    // Caller holds m_.
    void ensure_tag(std::string_view pool_id) {
        const std::string tag = digitalocean_pool_tag(pool_id);
        try {
            (void)api_->call("POST", "/tags", json{{"name", tag}}, Repeat::once);
            return;
        } catch (const HttpError& e) {
            if (tag_exists(tag)) return;
            fail("POST /tags", e);
        } catch (const std::exception& e) {  // a 2xx whose body is not JSON
            if (tag_exists(tag)) return;
            throw ProvisionError(std::string("DigitalOcean: POST /tags: ") + e.what());
        }
    }

    // Whether the account has this tag (GET /tags/{name}: 404 when not).
    bool tag_exists(const std::string& tag) {
        try {
            (void)api_->call("GET", "/tags/" + url_encode(tag));
            return true;
        } catch (const HttpError& e) {
            if (e.status() == 404) return false;
            throw;
        }
    }

    // The pool's tag once no droplet holds it (deleting a tag untags what has it, and the tag is
    // how list() and `sky gc` find a droplet that is left). Best effort.
    void delete_tag(std::string_view pool_id) noexcept {
        try {
            if (!list(pool_id).empty()) return;
            (void)api_->send("DELETE", "/tags/" + url_encode(digitalocean_pool_tag(pool_id)));
        } catch (...) {
        }
    }

    // The pool's firewall, by id when this adapter made it, else by its name (`sky gc`). Caller
    // holds m_. Best effort.
    void delete_firewall(std::string_view pool_id) noexcept {
        try {
            std::vector<std::string> ids;
            if (!firewall_id_.empty()) {
                ids.push_back(firewall_id_);
            } else {
                const std::string name = "sky-" + std::string(pool_id);
                for_each_page("/firewalls", "firewalls", [&](const json& f) {
                    if (text_of(f, "name") == name) ids.push_back(text_of(f, "id"));
                });
            }
            for (const auto& id : ids) {
                try {
                    (void)api_->send("DELETE", "/firewalls/" + url_encode(id));
                } catch (const HttpError& e) {
                    if (e.status() != 404) continue;
                }
                if (id == firewall_id_) firewall_id_.clear();
            }
        } catch (...) {
        }
    }

    // Pages of a list answer (links.pages.next), bounded.
    void for_each_page(const std::string& path, const char* key,
                       const std::function<void(const json&)>& each) {
        const std::string sep = path.find('?') == std::string::npos ? "?" : "&";
        for (int page = 1; page <= kMaxPages; ++page) {
            json r = api_->call("GET", fmt::format("{}{}per_page=200&page={}", path, sep, page));
            if (!r.is_object() || !r.contains(key) || !r[key].is_array()) return;
            for (const auto& item : r[key]) each(item);
            bool more = false;
            if (r.contains("links") && r["links"].is_object() && r["links"].contains("pages") &&
                r["links"]["pages"].is_object())
                more = !text_of(r["links"]["pages"], "next").empty();
            if (!more || r[key].empty()) return;
        }
    }

    std::string image_for(const Offer& o) const {
        if (!image_.empty()) return image_;
        if (o.accelerator.empty()) return "ubuntu-24-04-x64";
        if (accelerator_info(o.accelerator).manufacturer == "AMD") return "gpu-amd-base";
        return o.accelerator_count >= 8 ? "gpu-h100x8-base" : "gpu-h100x1-base";
    }

    static std::string blob_of(const std::string& public_key) {
        std::string t(trim(public_key));
        auto a = t.find(' ');
        if (a == std::string::npos) return t;
        auto b = t.find(' ', a + 1);
        return t.substr(a + 1, b == std::string::npos ? std::string::npos : b - a - 1);
    }

    // A ProvisionError naming the call; CredentialsRefused when the token was refused.
    [[noreturn]] void fail(const std::string& call, const std::exception& e) const {
        const auto* h = dynamic_cast<const HttpError*>(&e);
        throw_provision_error(fmt::format("DigitalOcean {} failed: {}", call, error_text(e)),
                              h ? h->status() : 0);
    }

    std::unique_ptr<rest::JsonApi> api_;
    std::string region_;
    std::string image_;
    std::mutex m_;
    std::string key_id_;
    std::string firewall_id_;
};

}  // namespace

std::string digitalocean_pool_tag(std::string_view pool_id) {
    return "sky-pool-" + std::string(pool_id);
}

std::unique_ptr<CloudAdapter> make_digitalocean_adapter(const DigitalOcean& config) {
    return std::make_unique<DigitalOceanAdapter>(config);
}

ProviderDescriptor digitalocean_provider() {
    return rest::cloud_descriptor<DigitalOcean>(
        {"digitalocean", "DigitalOcean", "sky::DigitalOcean"},
        ProviderFacts{
            .exposure =
                [](const PoolSpec&) {
                    return Exposure::pool_machines_only(
                        "the pool's own cloud firewall admits only the pool's machines");
                },
            // Per second with a 60 s minimum and a $0.01 minimum charge (since 2026-01-01;
            // hourly before).
            .billing = BillingPolicy{.increment = std::chrono::seconds(1),
                                     .minimum = std::chrono::seconds(60),
                                     .minimum_charge = 0.01},
            .runs_on_this_machine = false,
        },
        make_digitalocean_adapter,
        [](const DigitalOcean& c, std::vector<std::string>& problems) {
            // Region slugs are lowercase letters then digits ("nyc1", "tor1", "ams3").
            const std::string& r = c.region;
            const bool ok = !r.empty() && r.size() <= 16 &&
                            std::all_of(r.begin(), r.end(), [](unsigned char ch) {
                                return std::islower(ch) || std::isdigit(ch);
                            });
            if (!ok)
                problems.push_back(fmt::format(
                    "provider: sky::DigitalOcean region must be a region slug such as \"nyc1\", "
                    "got \"{}\"",
                    r));
        },
        rest::env_credentials({"DIGITALOCEAN_TOKEN"}, "DIGITALOCEAN_API_URL",
                              "https://api.digitalocean.com/v2"));
}

}  // namespace sky::detail
