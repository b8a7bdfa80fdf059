// The fakes' fault rates themselves, seen by sky's own HTTP client: each kind arrives as the
// client would meet it on a real network, the rate is about what was asked, and a seed replays
// the same faults. No root needed.
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <vector>

#include "fakes/common/http_fake.hpp"
#include "http/http_client.hpp"

using sky::detail::http_send;
using sky::detail::HttpError;
using sky::detail::HttpOptions;
using sky::detail::HttpRequest;
using sky::test::FaultKind;
using sky::test::HttpFake;
using sky::test::HttpFaultRate;
using sky::test::HttpReply;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

HttpOptions no_retry(std::chrono::milliseconds timeout = 2000ms) {
    HttpOptions o;
    o.attempt_timeout = timeout;
    o.retry.max_attempts = 1;
    o.throw_on_http_error = false;
    return o;
}

HttpFaultRate always(FaultKind kind) {
    HttpFaultRate r;
    r.kinds = {kind};
    r.probability = 1.0;
    r.seed = 7;
    return r;
}

struct Served {
    HttpFake fake;
    int handled = 0;
    Served() {
        fake.route("GET", "/thing", [this](const sky::test::HttpRequest&) {
            ++handled;
            return HttpReply{200, R"({"thing": "a long enough body to cut in half"})"};
        });
    }
    sky::detail::HttpResponse get(const HttpOptions& o = no_retry()) {
        HttpRequest r;
        r.url = fake.url("/thing");
        return http_send(r, o);
    }
};

}  // namespace

TEST_CASE("fault rates: refusals come before the handler, spoiled answers after it",
          "[faults][rates]") {
    SECTION("server_error: 500, 502 or 503, nothing done") {
        Served s;
        s.fake.add_fault_rate(always(FaultKind::server_error));
        auto r = s.get();
        CHECK((r.status == 500 || r.status == 502 || r.status == 503));
        CHECK(s.handled == 0);
        CHECK(s.fake.fault_hits(FaultKind::server_error) == 1);
    }
    SECTION("throttled: 429 with Retry-After") {
        Served s;
        s.fake.add_fault_rate(always(FaultKind::throttled));
        auto r = s.get();
        CHECK(r.status == 429);
        CHECK(r.header("Retry-After") == "1");
        CHECK(s.handled == 0);
    }
    SECTION("expired_auth and capacity: the cloud's own answers") {
        Served s;
        auto rate = always(FaultKind::expired_auth);
        rate.expired_auth = [](const sky::test::HttpRequest&) {
            return HttpReply{403, R"({"code":"expired"})"};
        };
        s.fake.add_fault_rate(rate);
        auto r = s.get();
        CHECK(r.status == 403);
        CHECK(r.body == R"({"code":"expired"})");
        CHECK(s.handled == 0);
    }
    SECTION("malformed: the handler ran, its 2xx body is unreadable") {
        Served s;
        s.fake.add_fault_rate(always(FaultKind::malformed));
        auto r = s.get();
        CHECK(r.status == 200);
        CHECK(s.handled == 1);
        CHECK(r.body.find("<html>") != std::string::npos);
        CHECK(r.body.find("half\"}") == std::string::npos);
    }
    SECTION("truncated: the handler ran, the client sees a transfer error") {
        Served s;
        s.fake.add_fault_rate(always(FaultKind::truncated));
        try {
            s.get();
            FAIL("a truncated body was accepted");
        } catch (const HttpError& e) {
            CHECK(e.kind() == HttpError::Kind::transport);
        }
        CHECK(s.handled == 1);
    }
    SECTION("stall: the handler ran, the answer never comes, the client times out") {
        Served s;
        s.fake.add_fault_rate(always(FaultKind::stall));
        const auto t0 = Clock::now();
        try {
            s.get(no_retry(500ms));
            FAIL("a stalled request was answered");
        } catch (const HttpError& e) {
            CHECK(e.kind() == HttpError::Kind::timeout);
        }
        CHECK(Clock::now() - t0 < 3s);
        CHECK(s.handled == 1);
    }
}

TEST_CASE("fault rates: about the rate asked for, the same faults for the same seed",
          "[faults][rates]") {
    auto pattern = [](std::uint64_t seed) {
        Served s;
        HttpFaultRate r;
        r.kinds = {FaultKind::server_error, FaultKind::throttled};
        r.probability = 0.3;
        r.seed = seed;
        s.fake.add_fault_rate(r);
        std::string out;
        for (int i = 0; i < 200; ++i) out += s.get().status == 200 ? '.' : 'x';
        return out;
    };
    const auto a = pattern(12345);
    CHECK(a == pattern(12345));
    CHECK(a != pattern(54321));
    const auto faults = std::count(a.begin(), a.end(), 'x');
    CHECK(faults > 30);  // 60 expected of 200; far outside [30, 90] would be a broken rate
    CHECK(faults < 90);
}

TEST_CASE("fault rates: SKY_HTTP_ATTEMPT_TIMEOUT_MS caps every attempt of the client",
          "[faults][rates]") {
    Served s;
    s.fake.add_fault_rate(always(FaultKind::stall));
    ::setenv("SKY_HTTP_ATTEMPT_TIMEOUT_MS", "300", 1);
    const auto t0 = Clock::now();
    CHECK_THROWS_AS(s.get(no_retry(60s)), HttpError);
    ::unsetenv("SKY_HTTP_ATTEMPT_TIMEOUT_MS");
    CHECK(Clock::now() - t0 < 3s);
}
