// The HTTP client against a real HTTP server on loopback: retries, give-up, timeouts, redaction.
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <sstream>

#include "fakes/common/http_fake.hpp"
#include "fakes/gzip_bomb.hpp"
#include "http/http_client.hpp"

using namespace sky::detail;
using RecordedRequest = sky::test::HttpRequest;
using Reply = sky::test::HttpReply;
using namespace std::chrono_literals;

namespace {

// The shared HTTP fake with one handler for every request.
class LoopbackServer : public sky::test::HttpFake {
public:
    explicit LoopbackServer(Handler handler) { route("*", "/*", std::move(handler)); }
};

HttpOptions fast_options(int attempts) {
    HttpOptions options;
    options.connect_timeout = 2000ms;
    options.attempt_timeout = 3000ms;
    options.retry.max_attempts = attempts;
    options.retry.initial_backoff = 5ms;
    options.retry.max_backoff = 20ms;
    return options;
}

// Routes spdlog's default logger into a string for the test's lifetime.
class LogCapture {
public:
    LogCapture() : previous_(spdlog::default_logger()) {
        auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(stream_);
        auto logger = std::make_shared<spdlog::logger>("capture", sink);
        logger->set_level(spdlog::level::trace);
        spdlog::set_default_logger(logger);
    }
    ~LogCapture() { spdlog::set_default_logger(previous_); }
    [[nodiscard]] std::string text() const { return stream_.str(); }

private:
    std::shared_ptr<spdlog::logger> previous_;
    std::ostringstream stream_;
};

}  // namespace

TEST_CASE("http: GET returns status, headers and body", "[http]") {
    LoopbackServer server([](const RecordedRequest& r) {
        return Reply{200, "hello " + r.target, {{"X-Test", "yes"}}};
    });
    auto response = http_send({.method = "GET", .url = server.url("/path?a=1")}, fast_options(1));
    CHECK(response.status == 200);
    CHECK(response.body == "hello /path?a=1");
    CHECK(response.header("x-test") == "yes");
    REQUIRE(server.requests().size() == 1);
    CHECK(server.requests()[0].header("User-Agent").rfind("sky/", 0) == 0);
}

TEST_CASE("http: POST sends body and headers", "[http]") {
    LoopbackServer server([](const RecordedRequest& r) { return Reply{200, r.body}; });
    HttpRequest request{.method = "POST", .url = server.url("/")};
    request.set_header("Content-Type", "application/x-www-form-urlencoded; charset=utf-8");
    request.body = "Action=DescribeInstances&Version=2016-11-15";
    auto response = http_send(request, fast_options(1));
    CHECK(response.body == request.body);
    auto seen = server.requests().at(0);
    CHECK(seen.method == "POST");
    CHECK(seen.header("Content-Type") == "application/x-www-form-urlencoded; charset=utf-8");
    CHECK(seen.header("Expect").empty());
}

TEST_CASE("http: retries 500 and 429, then succeeds", "[http]") {
    std::atomic<int> calls{0};
    LoopbackServer server([&](const RecordedRequest&) {
        int n = ++calls;
        if (n == 1) return Reply{500, "boom"};
        if (n == 2) return Reply{429, "slow down"};
        return Reply{200, "ok"};
    });
    auto response = http_send({.url = server.url("/")}, fast_options(4));
    CHECK(response.status == 200);
    CHECK(response.body == "ok");
    CHECK(server.requests().size() == 3);
}

TEST_CASE("http: gives up after max_attempts with a typed error", "[http]") {
    LoopbackServer server([](const RecordedRequest&) { return Reply{503, "unavailable"}; });
    auto options = fast_options(3);
    options.parse_error = [](const HttpResponse& r) -> std::optional<ProviderErrorInfo> {
        return ProviderErrorInfo{"Unavailable", r.body};
    };
    try {
        http_send({.url = server.url("/x")}, options);
        FAIL("expected HttpError");
    } catch (const HttpError& e) {
        CHECK(e.kind() == HttpError::Kind::status);
        CHECK(e.status() == 503);
        CHECK(e.attempts() == 3);
        CHECK(e.code() == "Unavailable");
        CHECK(e.provider_message() == "unavailable");
        CHECK(std::string(e.what()).find("HTTP 503") != std::string::npos);
    }
    CHECK(server.requests().size() == 3);
}

TEST_CASE("http: a 4xx is not retried and can be returned instead of thrown", "[http]") {
    LoopbackServer server([](const RecordedRequest&) { return Reply{404, "nope"}; });
    CHECK_THROWS_AS(http_send({.url = server.url("/")}, fast_options(4)), HttpError);
    CHECK(server.requests().size() == 1);
    auto options = fast_options(4);
    options.throw_on_http_error = false;
    auto response = http_send({.url = server.url("/")}, options);
    CHECK(response.status == 404);
    CHECK(server.requests().size() == 2);
}

TEST_CASE("http: provider throttling codes in the body are retried", "[http]") {
    std::atomic<int> calls{0};
    LoopbackServer server([&](const RecordedRequest&) {
        int n = ++calls;
        if (n == 1) {
            return Reply{
                400,
                "<Response><Errors><Error><Code>RequestLimitExceeded</Code><Message>Request "
                "limit exceeded.</Message></Error></Errors><RequestID>r</RequestID></"
                "Response>"};
        }
        if (n == 2) return Reply{400, R"({"__type":"Throttling","message":"Rate exceeded"})"};
        return Reply{200, "done"};
    });
    auto options = fast_options(5);
    options.retry.is_retryable = [](const HttpResponse& r) {
        return r.body.find("<Code>RequestLimitExceeded</Code>") != std::string::npos ||
               r.body.find("\"Throttling\"") != std::string::npos;
    };
    CHECK(http_send({.url = server.url("/")}, options).body == "done");
    CHECK(calls == 3);

    // Without the predicate the same 400 is final.
    calls = 0;
    CHECK_THROWS_AS(http_send({.url = server.url("/")}, fast_options(5)), HttpError);
    CHECK(calls == 1);
}

TEST_CASE("http: Retry-After is honoured within max_backoff", "[http]") {
    std::atomic<int> calls{0};
    LoopbackServer server([&](const RecordedRequest&) {
        if (++calls == 1) return Reply{429, "", {{"Retry-After", "1"}}};
        return Reply{200, "ok"};
    });
    auto options = fast_options(2);
    options.retry.max_backoff = 300ms;  // caps the server's 1 s
    auto start = std::chrono::steady_clock::now();
    CHECK(http_send({.url = server.url("/")}, options).status == 200);
    auto elapsed = std::chrono::steady_clock::now() - start;
    CHECK(elapsed >= 300ms);
    CHECK(elapsed < 900ms);
}

TEST_CASE("http: attempt timeout and total budget are enforced", "[http]") {
    LoopbackServer server([](const RecordedRequest&) { return Reply{200, "late", {}, 3000ms}; });
    auto options = fast_options(2);
    options.attempt_timeout = 200ms;
    auto start = std::chrono::steady_clock::now();
    try {
        http_send({.url = server.url("/slow")}, options);
        FAIL("expected a timeout");
    } catch (const HttpError& e) {
        CHECK(e.kind() == HttpError::Kind::timeout);
        CHECK(e.status() == 0);
        CHECK(e.attempts() == 2);
    }
    CHECK(std::chrono::steady_clock::now() - start < 2000ms);

    options.attempt_timeout = 5000ms;
    options.total_timeout = 300ms;
    start = std::chrono::steady_clock::now();
    try {
        http_send({.url = server.url("/slow")}, options);
        FAIL("expected a timeout");
    } catch (const HttpError& e) {
        CHECK(e.kind() == HttpError::Kind::timeout);
    }
    CHECK(std::chrono::steady_clock::now() - start < 2000ms);
}

TEST_CASE("http: connection refused is a transport error, retried then thrown", "[http]") {
    unsigned short port = 0;
    {
        LoopbackServer server([](const RecordedRequest&) { return Reply{}; });
        port = server.port();
    }  // closed: nothing listens there now
    try {
        http_send({.url = "http://127.0.0.1:" + std::to_string(port) + "/"}, fast_options(2));
        FAIL("expected HttpError");
    } catch (const HttpError& e) {
        CHECK(e.kind() == HttpError::Kind::transport);
        CHECK(e.attempts() == 2);
    }
}

TEST_CASE("http: secrets never reach error messages or logs", "[http][redaction]") {
    const std::string token = "tok-7f3a9c0e5b1d4a2f8e6c";
    const std::string api_key = "key/with+special=chars";
    const std::string aws_secret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
    LoopbackServer server([&](const RecordedRequest& r) {
        // A careless server echoing credentials back must not make us print them.
        return Reply{500, "bad auth " + r.header("Authorization") + " key=" + api_key +
                              " secret=" + aws_secret + " hdr=" + r.header("X-Custom-Secret")};
    });
    LogCapture logs;
    HttpRequest request{.method = "POST",
                        .url = server.url("/v1/pods?api_key=" + url_encode(api_key) + "&x=1")};
    request.set_header("Authorization", "Bearer " + token);
    request.set_header("X-Custom-Secret", "custom-9d8e7f");
    request.secret_headers = {"X-Custom-Secret"};
    request.secret_values = {aws_secret};
    request.body = "{}";
    auto options = fast_options(2);
    options.parse_error = [](const HttpResponse& r) -> std::optional<ProviderErrorInfo> {
        return ProviderErrorInfo{"AuthError", r.body};
    };
    std::string what;
    std::string body;
    std::string message;
    try {
        http_send(request, options);
        FAIL("expected HttpError");
    } catch (const HttpError& e) {
        what = e.what();
        body = e.body();
        message = e.provider_message();
    }
    // The server did get the real credentials: redaction is for display only.
    REQUIRE(server.requests().size() == 2);
    CHECK(server.requests()[0].header("Authorization") == "Bearer " + token);
    CHECK(server.requests()[0].target.find(url_encode(api_key)) != std::string::npos);

    const std::string log_text = logs.text();
    CHECK_FALSE(log_text.empty());  // there is something to check
    for (const std::string& text : {what, body, message, log_text}) {
        INFO(text);
        CHECK(text.find(token) == std::string::npos);
        CHECK(text.find(api_key) == std::string::npos);
        CHECK(text.find(url_encode(api_key)) == std::string::npos);
        CHECK(text.find(aws_secret) == std::string::npos);
        CHECK(text.find("custom-9d8e7f") == std::string::npos);
    }
    CHECK(what.find("[REDACTED]") != std::string::npos);
    CHECK(what.find("x=1") != std::string::npos);  // the rest of the URL stays useful
    CHECK(log_text.find("retrying") != std::string::npos);
}

TEST_CASE("http: backoff grows exponentially, capped, with bounded jitter", "[http]") {
    RetryPolicy policy;
    policy.initial_backoff = 100ms;
    policy.max_backoff = 1000ms;
    for (int i = 0; i < 50; ++i) {
        auto d1 = backoff_delay(policy, 1);
        CHECK(d1 >= 50ms);
        CHECK(d1 <= 100ms);
        auto d3 = backoff_delay(policy, 3);
        CHECK(d3 >= 200ms);
        CHECK(d3 <= 400ms);
        auto d40 = backoff_delay(policy, 40);
        CHECK(d40 >= 500ms);
        CHECK(d40 <= 1000ms);
    }
    CHECK(is_retryable_status(500));
    CHECK(is_retryable_status(503));
    CHECK(is_retryable_status(429));
    CHECK_FALSE(is_retryable_status(501));
    CHECK_FALSE(is_retryable_status(400));
    CHECK_FALSE(is_retryable_status(200));
}

TEST_CASE("http: url_encode/url_decode round trip", "[http]") {
    CHECK(url_encode("a b/c~d-e_f.g+h=") == "a%20b%2Fc~d-e_f.g%2Bh%3D");
    CHECK(url_decode("a%20b%2Fc+d%zz%4") == "a b/c+d%zz%4");
    CHECK(url_decode(url_encode("\xE1\x88\xB4 ok")) == "\xE1\x88\xB4 ok");
}

namespace {
// Peak resident memory of this process so far, in MiB.
long max_rss_mib() {
    rusage usage{};
    ::getrusage(RUSAGE_SELF, &usage);
    return usage.ru_maxrss / 1024;
}
}  // namespace

TEST_CASE("http: a gzip bomb is cut off at the body limit, never decoded whole", "[http]") {
    // About 6.5 MiB on the wire, 1 GiB decoded: without the limit the client would hold it all.
    const std::string bomb = sky::test::gzip_bomb(std::size_t{1} << 30);
    REQUIRE(bomb.size() < (std::size_t{8} << 20));
    LoopbackServer server([&](const RecordedRequest&) {
        return Reply{200, bomb, {{"Content-Encoding", "gzip"}, {"Content-Type", "text/xml"}}};
    });
    const long before = max_rss_mib();
    HttpOptions options = fast_options(3);
    REQUIRE(options.max_body_bytes == HttpOptions::kDefaultMaxBodyBytes);
    try {
        (void)http_send({.method = "GET", .url = server.url("/")}, options);
        FAIL("the bomb was accepted");
    } catch (const HttpError& e) {
        CHECK(e.kind() == HttpError::Kind::body_too_large);
        CHECK(e.attempts() == 1);  // never retried
        CHECK(std::string(e.what()).find("67108864 bytes") != std::string::npos);
    }
    CHECK(server.requests().size() == 1);
    // The limit (64 MiB) plus slack; the decoded body was 1 GiB.
    CHECK(max_rss_mib() - before < 160);

    // A smaller limit from the options, same answer.
    options.max_body_bytes = 1 << 20;
    CHECK_THROWS_WITH(http_send({.method = "GET", .url = server.url("/")}, options),
                      Catch::Contains("1048576 bytes"));
}

TEST_CASE("http: a plain body over the limit is refused, one under it is returned", "[http]") {
    LoopbackServer server([](const RecordedRequest& r) {
        return Reply{200, std::string(r.target == "/big" ? 300000 : 1000, 'x')};
    });
    HttpOptions options = fast_options(1);
    options.max_body_bytes = 200000;
    CHECK(http_send({.method = "GET", .url = server.url("/small")}, options).body.size() == 1000);
    try {
        (void)http_send({.method = "GET", .url = server.url("/big")}, options);
        FAIL("the body was accepted");
    } catch (const HttpError& e) {
        CHECK(e.kind() == HttpError::Kind::body_too_large);
        CHECK(e.body().empty());
    }
    options.max_body_bytes = 0;  // no limit
    CHECK(http_send({.method = "GET", .url = server.url("/big")}, options).body.size() == 300000);
}
