// The REST clouds' JSON client against a loopback HTTP fake: a 2xx answer that is not JSON (a
// proxy's error page, a body cut short) is asked for again where the call may run twice, and
// never for a create.
#include <catch2/catch.hpp>

#include "fakes/common/http_fake.hpp"
#include "providers/rest/json_api.hpp"

using sky::test::HttpFake;
using sky::test::HttpReply;
using sky::test::HttpRequest;
namespace rest = sky::detail::rest;

namespace {

rest::JsonApi api_for(const HttpFake& fake) {
    return rest::JsonApi(
        rest::bearer_config("TestCloud", {fake.url(), "test"}, "key-0123456789", nullptr));
}

sky::test::HttpFault page(const char* method, int count) {
    return {.method = method,
            .path = "/things",
            .reply = {200, "<html><body>502 Bad Gateway</body></html>"},
            .count = count};
}

}  // namespace

TEST_CASE("json api: a read whose answer is not JSON is asked again, twice at most", "[rest]") {
    HttpFake fake;
    fake.route("GET", "/things", [](const HttpRequest&) {
        return HttpReply{200, R"({"things":[1]})"};
    });
    auto api = api_for(fake);
    fake.inject_fault(page("GET", 2));
    CHECK(api.call("GET", "/things")["things"][0] == 1);
    CHECK(fake.count("GET", "/things") == 3);
    fake.inject_fault(page("GET", 3));
    CHECK_THROWS_WITH(api.call("GET", "/things"), Catch::Contains("not JSON"));
    CHECK(fake.count("GET", "/things") == 6);
}

TEST_CASE("json api: a create whose answer is not JSON is never sent again", "[rest]") {
    HttpFake fake;
    fake.route("POST", "/things", [](const HttpRequest&) {
        return HttpReply{201, R"({"id":"t-1"})"};
    });
    auto api = api_for(fake);
    fake.inject_fault(page("POST", 1));
    CHECK_THROWS_WITH(api.call("POST", "/things", nlohmann::json::object(), rest::Repeat::once),
                      Catch::Contains("not JSON"));
    CHECK(fake.count("POST", "/things") == 1);
}
