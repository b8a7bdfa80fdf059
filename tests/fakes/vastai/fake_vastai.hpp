#pragma once
/// \file A stateful fake of Vast.ai's REST API v0 (the parts sky uses), on the shared HTTP fake:
/// offer search (POST /bundles/ with a JSON query, GET /bundles/?q=), renting an ask (PUT
/// /asks/{id}/), instances (GET /instances/?owner=me, GET and DELETE /instances/{id}/), account
/// SSH keys (/ssh/). It checks the API key (Bearer or ?api_key=), the query's fields and operators
/// (vast.py's offers_fields), the create body's fields and the onstart limit, and answers as
/// Vast.ai does ({"success": false, "error", "msg"}; 410 for an ask already taken). Its instances
/// are test hosts when a HostBinding is given; bid instances can be outbid.
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "fakes/common/rest_fake.hpp"

namespace sky::test {

class HostBinding;

struct FakeVastOptions {
    std::string api_key = "vast-fake-key-6a8b0f1c2d";
    /// The marketplace's asks; empty: default_offers() (RTX 4090s and an H100).
    std::vector<nlohmann::json> offers;
    HostBinding* hosts = nullptr;
    /// An instance is loading for this many GETs of it, then running.
    int gets_until_running = 1;
};

class FakeVast final : public RestFake {
public:
    /// Its endpoint(): "http://127.0.0.1:<port>/api/v0".
    explicit FakeVast(FakeVastOptions options = {});

    /// Marks an ask rented by someone else (it still shows in searches until then: a renter
    /// who searched before gets 410).
    void take(const std::string& ask_id);
    /// Every ask is taken between search and rent: PUT /asks answers 410 for all.
    void take_all_on_rent(bool on);
    /// Someone outbid this bid instance: it stops (status_msg "outbid"), its host is released.
    void outbid(const std::string& instance_id);

    /// Not destroyed (alive() counts them: a stopped instance still bills its disk).
    [[nodiscard]] std::vector<nlohmann::json> instances() const { return live_views(); }
    [[nodiscard]] std::vector<nlohmann::json> ssh_keys() const;
    /// The create bodies PUT /asks received, in order.
    [[nodiscard]] std::vector<nlohmann::json> rent_requests() const;

    static std::vector<nlohmann::json> default_offers();

private:
    std::optional<HttpReply> refuse(const HttpRequest& r);
    HttpReply search(const HttpRequest& r);
    HttpReply rent(const HttpRequest& r);
    HttpReply get_one(const HttpRequest& r);
    HttpReply get_all(const HttpRequest& r);
    HttpReply destroy(const HttpRequest& r);
    HttpReply key_add(const HttpRequest& r);
    HttpReply key_list(const HttpRequest& r);
    HttpReply key_delete(const HttpRequest& r);
    HttpReply search_with(const nlohmann::json& query);
    nlohmann::json view(const std::string& id) const override;

    FakeVastOptions options_;
    std::map<std::string, bool> taken_;  // ask id -> rented
    bool take_all_ = false;
    std::vector<nlohmann::json> keys_, rents_;
    long long next_instance_ = 28471000, next_key_ = 90210;
};

}  // namespace sky::test
