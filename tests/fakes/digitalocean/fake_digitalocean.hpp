#pragma once
/// \file A stateful fake of DigitalOcean's API v2 (the parts sky uses), on the shared HTTP fake:
/// sizes, account SSH keys, tags (create, get, list, delete), droplets (create, get, list and
/// delete by id or tag), cloud firewalls (create, list, get, delete; applied by tag or droplet id,
/// enforced on the test hosts with nftables in each host's network namespace, as DigitalOcean
/// enforces them outside the droplet). It checks the bearer token, methods, paths, the JSON
/// bodies' field names, types and values the way the real service does (digitalocean/openapi:
/// droplet_create.yml, ssh_keys, firewall_rule.yml, tags): a firewall's ports are a port, a range
/// or "0" ("all" is refused as the API refuses it), and a firewall may name only tags that exist
/// and droplets that exist (a droplet's create makes its tags). It answers in DigitalOcean's
/// shapes and errors ({"id": "...", "message": "..."}; 401, 404, 422, 429). Its
/// droplets are test hosts when a HostBinding is given: a droplet boots with its user_data's keys
/// and its account keys.
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fakes/common/rest_fake.hpp"

namespace sky::test {

class HostBinding;

struct FakeDigitalOceanOptions {
    std::string token = "dop_v1_fake_token_0123456789abcdef";
    /// Sizes as GET /v2/sizes lists them; empty: three (a CPU size in nyc1/nyc3, an H100 and an
    /// L40S in nyc2/tor1), see default_sizes().
    std::vector<nlohmann::json> sizes;
    /// Slugs that GET /v2/sizes lists, yet POST /v2/droplets refuses as an invalid size (retired
    /// after the listing was read).
    std::set<std::string> unknown_sizes;
    /// Droplets boot on these hosts (none: addresses from 203.0.113.0/24, nothing boots).
    HostBinding* hosts = nullptr;
    /// A droplet is "new" for this many GETs of it, then "active" with its addresses.
    int gets_until_active = 1;
    /// With hosts: a droplet's inbound traffic passes only what its cloud firewalls allow (a
    /// droplet without one is open), enforced with nft in its host's network namespace. Needs
    /// nft; without it the rules are kept but not enforced.
    bool enforce_firewalls = true;
};

class FakeDigitalOcean final : public RestFake {
public:
    /// Its endpoint() is the base URL with the version prefix: "http://127.0.0.1:<port>/v2".
    explicit FakeDigitalOcean(FakeDigitalOceanOptions options = {});
    /// Every host open again (no firewall rules left in a host's namespace).
    ~FakeDigitalOcean() override;

    /// Droplets a size may still get per region ("size@region" or "size"); absent: any (or the
    /// free test hosts). At 0, POST /v2/droplets is a 422 as DigitalOcean answers it.
    void set_capacity(const std::string& size_or_size_at_region, int droplets);
    /// Whether GET /v2/sizes lists this size as available (its "available" field).
    void set_available(const std::string& slug, bool available);
    /// The next `count` requests (any path) get 429 with DigitalOcean's rate-limit body.
    void rate_limit(int count);

    /// Droplets not deleted, as GET /v2/droplets/{id} shows them (alive() counts them).
    [[nodiscard]] std::vector<nlohmann::json> droplets() const { return live_views(); }
    /// Every droplet ever created (deleted ones too), with "deleted": true/false.
    [[nodiscard]] std::vector<nlohmann::json> all_droplets() const;
    [[nodiscard]] std::vector<nlohmann::json> keys() const;
    /// The account's tags by name (made by POST /v2/tags or by a droplet's create).
    [[nodiscard]] std::vector<std::string> tags() const;
    /// Cloud firewalls not deleted, as GET /v2/firewalls/{id} shows them.
    [[nodiscard]] std::vector<nlohmann::json> firewalls() const;
    /// Whether firewalls are enforced on the hosts (enforce_firewalls, hosts, and nft here).
    [[nodiscard]] bool enforcing() const;
    /// The user_data a droplet was created with.
    [[nodiscard]] std::string user_data(const std::string& id) const;
    /// Requests refused for their token.
    [[nodiscard]] int auth_failures() const;

    static std::vector<nlohmann::json> default_sizes();

private:
    HttpReply handle_sizes(const HttpRequest& r);
    HttpReply handle_keys_list(const HttpRequest& r);
    HttpReply handle_keys_create(const HttpRequest& r);
    HttpReply handle_keys_delete(const HttpRequest& r);
    HttpReply handle_create(const HttpRequest& r);
    HttpReply handle_get(const HttpRequest& r);
    HttpReply handle_list(const HttpRequest& r);
    HttpReply handle_delete(const HttpRequest& r);
    HttpReply handle_delete_by_tag(const HttpRequest& r);
    HttpReply handle_tag_create(const HttpRequest& r);
    HttpReply handle_tag_get(const HttpRequest& r);
    HttpReply handle_tag_list(const HttpRequest& r);
    HttpReply handle_tag_delete(const HttpRequest& r);
    HttpReply handle_firewall_create(const HttpRequest& r);
    HttpReply handle_firewall_list(const HttpRequest& r);
    HttpReply handle_firewall_get(const HttpRequest& r);
    HttpReply handle_firewall_delete(const HttpRequest& r);
    // The hosts' nft rules from the firewalls and droplets now; caller holds m_.
    void enforce_locked();
    std::optional<HttpReply> refuse(const HttpRequest& r);  // auth and content type
    nlohmann::json view(const std::string& id) const override;
    nlohmann::json tag_view(const std::string& name) const;  // caller holds m_
    void delete_locked(const std::string& id);

    FakeDigitalOceanOptions options_;
    std::vector<nlohmann::json> keys_;
    std::vector<nlohmann::json> firewalls_;
    std::set<std::string> tags_;
    std::set<int> filtered_hosts_;  // hosts whose namespace has the fake's rules
    bool nft_ = false;
    std::map<std::string, int> capacity_;
    long long next_id_ = 3164444000;
    long long next_key_ = 512189;
    int auth_failures_ = 0;
};

}  // namespace sky::test
