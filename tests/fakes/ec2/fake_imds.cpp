#include "fakes/ec2/fake_imds.hpp"

#include <fmt/format.h>

#include <ctime>
#include <future>
#include <random>

namespace sky::test {

namespace {

HttpReply text(int status, std::string body) {
    return {status, std::move(body), {{"Content-Type", "text/plain"}}};
}

// IMDS's own error pages are small HTML documents; the status is what a client acts on.
HttpReply refuse(int status, const char* title) {
    return {status,
            fmt::format("<?xml version=\"1.0\" encoding=\"iso-8859-1\"?>\n<html><head><title>{0} "
                        "- {1}</title></head><body><h1>{0} - {1}</h1></body></html>\n",
                        status, title),
            {{"Content-Type", "text/html"}}};
}

}  // namespace

FakeImds::FakeImds(const TestHosts& hosts, int host) {
    // The listening socket is made in the host's namespace (a thread of its own enters it);
    // the server's threads, started from there, serve it.
    auto made = std::async(std::launch::async, [&hosts, host] {
        hosts.enter_netns(host);
        return std::make_unique<HttpFake>(
            HttpFakeOptions{.server = "EC2ws", .content_type = "text/plain"});
    });
    http_ = made.get();
    http_->route("PUT", "/latest/api/token", [this](const HttpRequest& r) { return token(r); });
    http_->route("GET", "/latest/api/token",
                 [](const HttpRequest&) { return refuse(405, "Method Not Allowed"); });
    http_->route("GET", "/latest/meta-data/*", [this](const HttpRequest& r) { return read(r); });
}

FakeImds::~FakeImds() = default;

std::string FakeImds::endpoint() const { return http_->url(); }

std::string FakeImds::iso_time(std::chrono::system_clock::time_point t) {
    const std::time_t s = std::chrono::system_clock::to_time_t(t);
    std::tm tm{};
    ::gmtime_r(&s, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%FT%TZ", &tm);
    return buf;
}

void FakeImds::announce_interruption(const std::string& action,
                                     std::chrono::system_clock::time_point at) {
    std::lock_guard lk(m_);
    instance_action_ = fmt::format(R"({{"action": "{}", "time": "{}"}})", action, iso_time(at));
}

void FakeImds::announce_rebalance(std::chrono::system_clock::time_point notice_time) {
    std::lock_guard lk(m_);
    rebalance_ = fmt::format(R"({{"noticeTime": "{}"}})", iso_time(notice_time));
}

void FakeImds::clear() {
    std::lock_guard lk(m_);
    instance_action_.reset();
    rebalance_.reset();
}

int FakeImds::tokens_issued() const {
    std::lock_guard lk(m_);
    return issued_;
}

int FakeImds::refused_unauthenticated() const {
    std::lock_guard lk(m_);
    return refused_;
}

int FakeImds::authenticated_reads() const {
    std::lock_guard lk(m_);
    return reads_;
}

HttpReply FakeImds::token(const HttpRequest& r) {
    if (!r.header("X-Forwarded-For").empty()) return refuse(403, "Forbidden");
    const std::string ttl = r.header("X-aws-ec2-metadata-token-ttl-seconds");
    long long seconds = 0;
    if (ttl.empty() || ttl.size() > 6 || ttl.find_first_not_of("0123456789") != std::string::npos ||
        (seconds = std::stoll(ttl)) < 1 || seconds > 21600)
        return refuse(400, "Bad Request");
    static thread_local std::mt19937_64 rng{std::random_device{}()};
    std::string t = fmt::format("AQAEA{:016x}{:016x}==", rng(), rng());
    std::lock_guard lk(m_);
    tokens_[t] = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    ++issued_;
    return text(200, t);
}

HttpReply FakeImds::read(const HttpRequest& r) {
    std::lock_guard lk(m_);
    const auto it = tokens_.find(r.header("X-aws-ec2-metadata-token"));
    if (it == tokens_.end() || std::chrono::steady_clock::now() >= it->second) {
        ++refused_;
        return refuse(401, "Unauthorized");
    }
    ++reads_;
    if (r.path == "/latest/meta-data/spot/instance-action") {
        if (instance_action_) return text(200, *instance_action_);
    } else if (r.path == "/latest/meta-data/events/recommendations/rebalance") {
        if (rebalance_) return text(200, *rebalance_);
    } else if (r.path == "/latest/meta-data/instance-life-cycle") {
        return text(200, "spot");
    }
    return refuse(404, "Not Found");
}

}  // namespace sky::test
