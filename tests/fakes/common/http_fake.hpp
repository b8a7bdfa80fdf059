#pragma once
/// \file The HTTP side of every provider fake: a real HTTP/1.1 server on 127.0.0.1 (Boost.Beast,
/// keep-alive, a thread per connection) that answers from routes registered by method and path
/// pattern, records every request, and injects faults on demand. A fake is then its resource
/// model: `fake.route("POST", "/v1/machines/{id}/claim", ...)`.
///
/// Path patterns: segments separated by '/'; "{name}" matches one non-empty segment (its decoded
/// value lands in HttpRequest::params["name"]); a last segment "*" matches the rest (empty too);
/// every other segment must be equal. The query string is never part of the match. Method "*"
/// matches any method.
#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "fakes/common/fault_rate.hpp"

namespace sky::test {

/// One request as the fake saw it.
struct HttpRequest {
    std::string method;  ///< "GET"
    std::string target;  ///< as sent: "/v1/machines?state=free"
    std::string path;    ///< the target without its query: "/v1/machines"
    std::string query;   ///< after '?', undecoded: "state=free"
    std::vector<std::pair<std::string, std::string>> headers;
    std::string body;
    /// The pattern's "{name}" segments, percent-decoded (set once a route matched).
    std::map<std::string, std::string> params;

    /// The first header of this name (case-insensitive); "" when absent.
    [[nodiscard]] std::string header(std::string_view name) const;
    /// The query's parameters, percent-decoded ("a=1&b" is {a: "1", b: ""}; the last of a
    /// repeated name wins).
    [[nodiscard]] std::map<std::string, std::string> query_params() const;
};

/// One answer.
struct HttpReply {
    int status = 200;
    std::string body;
    /// Extra or overriding headers (Content-Type defaults to the fake's content_type).
    std::vector<std::pair<std::string, std::string>> headers;
    /// Answer this late (cut short when the server stops): a timeout test.
    std::chrono::milliseconds delay{0};
    /// How the answer travels: whole; never (the connection stays open, silent, until the
    /// client closes it or the fake stops); or cut short (Content-Length says more than is
    /// sent, then the connection closes).
    enum class Delivery { whole, stall, truncated } delivery = Delivery::whole;
};

/// A fault the next `count` requests matching `method` and `path` get instead of their route's
/// answer (after the request is logged, before any handler runs).
struct HttpFault {
    std::string method = "*";  ///< "*": any method
    std::string path = "/*";   ///< a route pattern
    HttpReply reply{503, R"({"error":"injected fault"})"};
    int count = 1;
};

/// Faults at a rate: every request matching `method`, `path` (and `when`, if set) gets a fault
/// with `probability`, of a kind drawn from `kinds` (after it is logged). server_error,
/// throttled, capacity and expired_auth refuse the request before its handler runs; stall,
/// malformed and truncated let it run (what it did happened) and spoil its answer.
struct HttpFaultRate {
    std::string method = "*";
    std::string path = "/*";
    /// A further condition (e.g. a GraphQL body naming a launch mutation); none: every request.
    std::function<bool(const HttpRequest&)> when;
    std::vector<FaultKind> kinds;
    double probability = 0.3;
    /// 0: SKY_FAULT_SEED, else random; printed on stderr either way.
    std::uint64_t seed = 0;
    /// The cloud's own "no capacity" answer; none: 503 {"error": "no capacity"}.
    std::function<HttpReply(const HttpRequest&)> capacity;
    /// The cloud's own expired-credentials answer; none: 401 {"error": "token expired"}.
    std::function<HttpReply(const HttpRequest&)> expired_auth;
};

/// What a fake is called and answers by default.
struct HttpFakeOptions {
    std::string server = "sky-fake";                ///< the Server header
    std::string content_type = "application/json";  ///< unless a reply sets its own
    std::chrono::milliseconds idle_timeout{30000};  ///< a keep-alive connection's idle limit
};

class HttpFake {
public:
    using Handler = std::function<HttpReply(const HttpRequest&)>;

    explicit HttpFake(HttpFakeOptions options = {});
    /// Stops accepting, ends every connection and joins every thread (bounded: each wait in the
    /// server is at most 100 ms, each delay is cut short).
    ~HttpFake();
    HttpFake(const HttpFake&) = delete;
    HttpFake& operator=(const HttpFake&) = delete;

    /// Answers requests matching `method` and `pattern` with `handler`. Routes are tried in the
    /// order they were added. A handler may run on several threads at once; an exception from it
    /// is a 500 whose body is {"error": what}. No route matches: 404 (405 when the path does).
    void route(std::string method, std::string pattern, Handler handler);
    /// Queues a fault; faults are matched in the order they were queued.
    void inject_fault(HttpFault fault);
    /// Adds a fault rate (queued faults are matched first, then rates in the order added);
    /// returns its seed.
    std::uint64_t add_fault_rate(HttpFaultRate rate);
    /// Ends every fault rate (e.g. before a test's cleanup checks).
    void clear_fault_rates();
    /// Requests that got a fault of this kind from a rate so far.
    [[nodiscard]] int fault_hits(FaultKind kind) const;

    [[nodiscard]] unsigned short port() const { return port_; }
    /// "http://127.0.0.1:<port>" followed by `target`.
    [[nodiscard]] std::string url(std::string_view target = "") const;

    /// Every request so far, in arrival order.
    [[nodiscard]] std::vector<HttpRequest> requests() const;
    /// How many requests so far matched `method` and `pattern`.
    [[nodiscard]] int count(std::string_view method, std::string_view pattern) const;
    /// Connections accepted so far (keep-alive shows as fewer connections than requests).
    [[nodiscard]] int connections() const { return connections_accepted_; }

    /// Answers one request as the socket layer does (log, faults, routes); for in-process tests.
    HttpReply handle(HttpRequest request);

private:
    struct Route {
        std::string method;
        std::string pattern;
        Handler handler;
    };
    struct Connection {
        std::thread thread;
        std::shared_ptr<std::atomic<bool>> done;
    };
    struct Rate {
        HttpFaultRate spec;
        std::shared_ptr<FaultDice> dice;
    };
    struct Net;  // the Asio objects, kept out of this header
    void accept_loop();
    void serve(int fd);
    void wait(std::chrono::milliseconds delay) const;
    void stall(int fd) const;

    HttpFakeOptions options_;
    std::unique_ptr<Net> net_;
    unsigned short port_ = 0;
    std::atomic<bool> stop_{false};
    std::atomic<int> connections_accepted_{0};

    mutable std::mutex mutex_;  // guards the routes, faults and log
    std::vector<Route> routes_;
    std::deque<HttpFault> faults_;
    std::vector<Rate> rates_;
    int rate_hits_[7] = {};
    std::vector<HttpRequest> log_;

    std::mutex threads_mutex_;
    std::vector<Connection> threads_;
    std::thread acceptor_;
};

/// Routes to a fake's member functions, each behind the fake's `refuse` (its credentials and
/// content-type checks): a request `refuse` answers never reaches the member. Returns
/// `route(method, pattern, &Fake::member)`.
template <class Fake>
auto guarded_routes(HttpFake& http, Fake* fake,
                    std::optional<HttpReply> (Fake::*refuse)(const HttpRequest&)) {
    return [&http, fake, refuse](std::string method, std::string pattern,
                                 HttpReply (Fake::*member)(const HttpRequest&)) {
        http.route(std::move(method), std::move(pattern),
                   [fake, refuse, member](const HttpRequest& r) -> HttpReply {
                       if (auto no = (fake->*refuse)(r)) return *no;
                       return (fake->*member)(r);
                   });
    };
}

/// Whether `path` (no query) matches a route pattern; fills `params` with "{name}" segments.
bool match_path(std::string_view pattern, std::string_view path,
                std::map<std::string, std::string>* params = nullptr);

}  // namespace sky::test
