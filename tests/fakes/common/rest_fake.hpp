#pragma once
/// \file What the REST cloud fakes (DigitalOcean, Verda, Vast.ai, RunPod) do alike, as one base:
/// the HTTP fake they answer on, the check of a request's key and JSON body, and their machines
/// by id (shown as the cloud shows them, polled until they are up, deleted, or taken back by the
/// cloud), each booted on a test host when a HostBinding is given. A fake is then its API's
/// routes, shapes and errors.
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fakes/common/http_fake.hpp"

namespace sky::test {

class HostBinding;

/// One machine of a REST cloud fake.
struct FakeMachine {
    nlohmann::json body;     ///< what the cloud shows of it, less what view() adds
    std::string ip;          ///< where its SSH answers: its test host's address, or a made-up one
    int port = 22;           ///< its SSH port
    std::string private_ip;  ///< where a cloud shows one
    std::string user_data;   ///< the boot script it was created with
    int polls = 0;           ///< GETs (queries) of it so far: it comes up after a few
    bool gone = false;       ///< deleted (destroyed, terminated): no longer listed
    bool reclaimed = false;  ///< taken back by the cloud (preempted, outbid, interrupted)
};

/// The base of a REST cloud fake. Thread-safe: a handler locks m_ around what it reads or changes
/// of machines_ (the members that say "caller holds m_" expect that).
class RestFake {
public:
    RestFake(const RestFake&) = delete;
    RestFake& operator=(const RestFake&) = delete;

    /// The API's base URL: "http://127.0.0.1:<port>" and the fake's prefix ("/v2", "/api/v0").
    [[nodiscard]] std::string endpoint() const { return http_.url(prefix_); }
    [[nodiscard]] HttpFake& http() { return http_; }
    /// Machines not deleted (a machine the cloud took back still counts until it is deleted).
    [[nodiscard]] int alive() const;

protected:
    /// `server`: the Server header the cloud's API sends; `prefix`: what endpoint() adds.
    RestFake(std::string server, std::string prefix, HostBinding* hosts);
    /// Releases the host of every machine still on one (nothing keeps running after the fake).
    virtual ~RestFake();

    /// How the cloud shows machine `id` now (caller holds m_).
    [[nodiscard]] virtual nlohmann::json view(const std::string& id) const = 0;

    /// Whether `r` carries `key` as "Authorization: Bearer <key>", or, where the cloud takes
    /// that too, as the query parameter api_key.
    [[nodiscard]] static bool has_key(const HttpRequest& r, const std::string& key,
                                      bool or_query_param);
    /// Whether `r` declares its body JSON (Content-Type application/json, parameters allowed).
    [[nodiscard]] static bool json_declared(const HttpRequest& r);
    /// `body` as the answer, with `status`.
    [[nodiscard]] static HttpReply json_reply(int status, const nlohmann::json& body);

    /// Puts new machine `id` on a free test host, booted with `boot_script` and `keys` (the
    /// account's public keys) authorized, and records it with that host's address and SSH port;
    /// without hosts, with `ip` and `port`. Null when every host is taken: the cloud has no
    /// capacity (caller holds m_).
    FakeMachine* add_machine(const std::string& id, std::string_view boot_script,
                             const std::vector<std::string>& keys, std::string ip, int port);
    /// Machine `id` unless it is unknown or deleted; null then (caller holds m_).
    [[nodiscard]] FakeMachine* live(const std::string& id);
    /// Deletes machine `id`: no longer listed, its host released (caller holds m_).
    void remove_machine(const std::string& id);
    /// The cloud takes machine `id` back (preempts, outbids, interrupts it): its host is
    /// released, and view() shows what the cloud shows then. Throws std::out_of_range for an
    /// unknown id.
    void reclaim(const std::string& id);
    /// view() of every machine not deleted, by id.
    [[nodiscard]] std::vector<nlohmann::json> live_views() const;
    /// Deletes every machine (for a fake's destructor: the hosts are free again; caller holds m_).
    void remove_all();

    HttpFake http_;
    HostBinding* hosts_;
    mutable std::mutex m_;
    std::map<std::string, FakeMachine> machines_;

private:
    std::string prefix_;
};

}  // namespace sky::test
