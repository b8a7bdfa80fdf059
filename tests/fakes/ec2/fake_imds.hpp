#pragma once
/// \file The EC2 instance metadata service as a spot instance sees it, for the probe that runs
/// on a node (src/providers/aws/spot_probe.sh): IMDSv2 only, as sky launches its instances
/// (HttpTokens=required): a session token from `PUT /latest/api/token` with a TTL header first;
/// a GET without a valid, unexpired token is refused 401, a token PUT without a TTL in 1..21600 s
/// is 400, one carrying X-Forwarded-For is 403 (AWS refuses forwarded token requests).
/// `/latest/meta-data/spot/instance-action` and `/latest/meta-data/events/recommendations/
/// rebalance` answer 404 until announced, then the JSON AWS documents (text/plain, as IMDS sends
/// it). Served on 127.0.0.1 inside a test host's network namespace, so that only that host's
/// node reaches it, as only an instance reaches its own metadata.
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "fakes/common/http_fake.hpp"
#include "hosts/test_hosts.hpp"

namespace sky::test {

class FakeImds {
public:
    /// Serves on host `host`'s 127.0.0.1 (any free port).
    FakeImds(const TestHosts& hosts, int host);
    ~FakeImds();
    FakeImds(const FakeImds&) = delete;
    FakeImds& operator=(const FakeImds&) = delete;

    /// "http://127.0.0.1:<port>", as the host reaches it.
    [[nodiscard]] std::string endpoint() const;
    /// EC2 is reclaiming the instance: instance-action answers {"action", "time"} from now on.
    void announce_interruption(const std::string& action, std::chrono::system_clock::time_point at);
    /// A rebalance recommendation: events/recommendations/rebalance answers {"noticeTime"}.
    void announce_rebalance(std::chrono::system_clock::time_point notice_time);
    /// Nothing announced any more (both paths answer 404 again): the host is a fresh instance.
    void clear();
    /// Token PUTs answered 200 so far.
    [[nodiscard]] int tokens_issued() const;
    /// Metadata GETs refused for a missing or unknown token so far.
    [[nodiscard]] int refused_unauthenticated() const;
    /// Metadata GETs answered with a valid token so far.
    [[nodiscard]] int authenticated_reads() const;

    /// The time as IMDS writes it: "2026-12-02T06:00:00Z".
    static std::string iso_time(std::chrono::system_clock::time_point t);

private:
    HttpReply token(const HttpRequest& r);
    HttpReply read(const HttpRequest& r);

    std::unique_ptr<HttpFake> http_;
    mutable std::mutex m_;
    std::map<std::string, std::chrono::steady_clock::time_point> tokens_;  // until expiry
    std::optional<std::string> instance_action_;                           // the JSON body
    std::optional<std::string> rebalance_;
    int issued_ = 0;
    int refused_ = 0;
    int reads_ = 0;
};

}  // namespace sky::test
