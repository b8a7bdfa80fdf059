// Verda's tokens in errors (security review r4 I6): the access and refresh tokens the token
// endpoint hands out are as secret as the client secret. An answer that echoes the bearer token
// shows it masked; a token answer that is not JSON (form-encoded, say) is never quoted.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "fakes/verda/fake_verda.hpp"
#include "providers/verda/verda.hpp"
#include "sky/sky.hpp"
#include "support/scoped_env.hpp"

using sky::test::FakeVerda;

namespace {

const std::string kSecret = "verda-secret-fake-0123456789";

std::string offers_error(const FakeVerda& fake) {
    sky::test::ScopedEnv env(
        {{"VERDA_CLIENT_ID", "verda-client-0001"}, {"VERDA_CLIENT_SECRET", kSecret}});
    auto a = sky::detail::make_verda_adapter(sky::Verda{.endpoint = fake.endpoint()});
    std::string seen;
    try {
        (void)a->live_offers(sky::Catalog::embedded(), {}, [&](sky::Event e) {
            if (auto* x = std::get_if<sky::ErrorEvent>(&e)) seen += x->message + "\n";
        });
    } catch (const std::exception& e) {
        seen += e.what();
    }
    return seen;
}

}  // namespace

TEST_CASE("verda: an answer that echoes the bearer token shows it masked", "[verda][security]") {
    FakeVerda fake;
    std::string echoed;
    sky::test::HttpFaultRate rate;
    rate.method = "GET";
    rate.path = "/v1/instance-types";
    rate.kinds = {sky::test::FaultKind::capacity};
    rate.probability = 1.0;
    rate.capacity = [&](const sky::test::HttpRequest& r) {
        echoed = r.header("Authorization").substr(7);
        return sky::test::HttpReply{
            400,
            nlohmann::json{{"code", "bad_request"}, {"message", "unknown token " + echoed}}.dump()};
    };
    fake.http().add_fault_rate(rate);
    const std::string seen = offers_error(fake);
    INFO(seen);
    REQUIRE(echoed.size() > 8);  // the fake saw a real token
    CHECK(seen.find("unknown token") != std::string::npos);
    CHECK(seen.find(echoed) == std::string::npos);
    CHECK(seen.find(kSecret) == std::string::npos);
}

TEST_CASE("verda: a token answer that is not JSON is never quoted", "[verda][security]") {
    FakeVerda fake;
    fake.http().inject_fault(
        {.method = "POST",
         .path = "/v1/oauth2/token",
         .reply = {200, "access_token=sky-form-token-7f1c&refresh_token=sky-form-refresh-9a2b"},
         .count = 10});
    const std::string seen = offers_error(fake);
    INFO(seen);
    CHECK(seen.find("not JSON") != std::string::npos);
    CHECK(seen.find("sky-form-token-7f1c") == std::string::npos);
    CHECK(seen.find("sky-form-refresh-9a2b") == std::string::npos);
}
