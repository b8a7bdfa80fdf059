#pragma once
/// \file A stateful fake of Verda's (formerly DataCrunch's) public API v1, on the shared HTTP
/// fake: OAuth2 client credentials and refresh tokens (JSON bodies), instance types and
/// availability, SSH keys (/sshkeys and /ssh-keys), startup scripts, instances (created with the id
/// as text, deleted through PUT /instances). It checks the bearer token, methods, paths and field
/// names as verda-cloud/sdk-python sends them and answers in Verda's error shape
/// ({"code", "message"}: 401 for an expired token, insufficient_funds, not_found, ...). Its
/// instances are test hosts when a HostBinding is given; spot instances can be reclaimed.
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fakes/common/rest_fake.hpp"

namespace sky::test {

class HostBinding;

struct FakeVerdaOptions {
    std::string client_id = "verda-client-0001";
    std::string client_secret = "verda-secret-fake-0123456789";
    /// GET /instance-types; empty: default_types().
    std::vector<nlohmann::json> types;
    /// Locations and what each has on demand / as spot; empty: every type in FIN-01, both.
    std::map<std::string, std::set<std::string>> on_demand, spot;
    /// Listed by GET /instance-types, yet refused as unknown by availability and POST
    /// /instances (a type retired after the listing was read).
    std::set<std::string> unknown_types;
    HostBinding* hosts = nullptr;
    /// An instance is "ordered", then "provisioning", for this many GETs of it in all.
    int gets_until_running = 2;
    int token_lifetime_s = 3600;
};

class FakeVerda final : public RestFake {
public:
    /// Its endpoint(): "http://127.0.0.1:<port>/v1".
    explicit FakeVerda(FakeVerdaOptions options = {});

    /// Every access token issued so far stops working (401 "expired"); refresh tokens still do.
    void expire_tokens();
    /// The account's balance runs out: POST /instances answers insufficient_funds.
    void set_funds(bool enough);
    /// Takes `type` out of (or back into) availability everywhere.
    void set_available(const std::string& type, bool on_demand, bool spot);
    /// Reclaims a spot instance: status "discontinued", its host released.
    void preempt(const std::string& id);

    /// Instances that still exist (not deleted), as GET /instances/{id} shows them.
    [[nodiscard]] std::vector<nlohmann::json> instances() const { return live_views(); }
    /// Instances not deleted nor discontinued (a reclaimed spot instance no longer runs).
    [[nodiscard]] int alive() const;
    [[nodiscard]] std::vector<nlohmann::json> ssh_keys() const;
    [[nodiscard]] std::vector<nlohmann::json> scripts() const;
    [[nodiscard]] int tokens_issued() const;
    [[nodiscard]] int refreshes() const;

    static std::vector<nlohmann::json> default_types();

private:
    std::optional<HttpReply> refuse(const HttpRequest& r);
    HttpReply token(const HttpRequest& r);
    HttpReply types(const HttpRequest& r);
    HttpReply availability(const HttpRequest& r);
    HttpReply available_one(const HttpRequest& r);
    HttpReply keys_get(const HttpRequest& r);
    HttpReply keys_post(const HttpRequest& r);
    HttpReply keys_delete(const HttpRequest& r);
    HttpReply scripts_get(const HttpRequest& r);
    HttpReply scripts_post(const HttpRequest& r);
    HttpReply scripts_delete(const HttpRequest& r);
    HttpReply instances_post(const HttpRequest& r);
    HttpReply instances_get(const HttpRequest& r);
    HttpReply instance_get(const HttpRequest& r);
    HttpReply instances_put(const HttpRequest& r);
    nlohmann::json view(const std::string& id) const override;
    std::string new_id();

    FakeVerdaOptions options_;
    std::map<std::string, int> access_;  // token -> generation
    std::set<std::string> refresh_;
    int generation_ = 0;
    int issued_ = 0, refreshes_ = 0;
    bool funds_ = true;
    std::vector<nlohmann::json> keys_, scripts_;
    unsigned long next_ = 1;
};

}  // namespace sky::test
