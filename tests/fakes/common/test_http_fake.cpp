// The shared HTTP fake over real sockets: routes and path parameters, 404/405, handler errors,
// the request log, keep-alive, faults for the next N matching requests, and a bounded stop.
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "fakes/common/http_fake.hpp"

using sky::test::HttpFake;
using sky::test::HttpFault;
using sky::test::HttpReply;
using sky::test::HttpRequest;
using namespace std::chrono_literals;

namespace {

namespace http = boost::beast::http;
using boost::asio::ip::tcp;

struct Answer {
    int status = 0;
    std::string body;
    std::string content_type;
};

// One client connection (keep-alive): every exchange goes over the same socket.
class Client {
public:
    explicit Client(unsigned short port) : socket_(io_) {
        socket_.connect({boost::asio::ip::make_address("127.0.0.1"), port});
    }
    Answer send(const std::string& method, const std::string& target, const std::string& body = {},
                const std::string& authorization = {}) {
        http::request<http::string_body> req{http::string_to_verb(method), target, 11};
        req.set(http::field::host, "127.0.0.1");
        if (!authorization.empty()) req.set(http::field::authorization, authorization);
        req.keep_alive(true);
        req.body() = body;
        req.prepare_payload();
        http::write(socket_, req);
        http::response<http::string_body> res;
        http::read(socket_, buffer_, res);
        return {static_cast<int>(res.result_int()), res.body(),
                std::string(res[http::field::content_type])};
    }

private:
    boost::asio::io_context io_;
    tcp::socket socket_;
    boost::beast::flat_buffer buffer_;
};

}  // namespace

TEST_CASE("http fake: path patterns", "[fake][http]") {
    std::map<std::string, std::string> p;
    CHECK(sky::test::match_path("/v1/machines", "/v1/machines"));
    CHECK_FALSE(sky::test::match_path("/v1/machines", "/v1/machines/x"));
    CHECK_FALSE(sky::test::match_path("/v1/machines/{id}", "/v1/machines"));
    CHECK_FALSE(sky::test::match_path("/v1/machines/{id}", "/v1/machines/"));
    REQUIRE(sky::test::match_path("/v1/machines/{id}/claim", "/v1/machines/m%2D1/claim", &p));
    CHECK(p.at("id") == "m-1");
    CHECK(sky::test::match_path("/*", "/"));
    CHECK(sky::test::match_path("/*", "/a/b/c"));
    CHECK(sky::test::match_path("/v1/*", "/v1/machines/m1"));
    CHECK_FALSE(sky::test::match_path("/v2/*", "/v1/machines"));
}

TEST_CASE("http fake: routes answer, the log records, keep-alive holds", "[fake][http]") {
    HttpFake fake;
    fake.route("GET", "/v1/items", [](const HttpRequest&) { return HttpReply{200, "[1,2]"}; });
    fake.route("POST", "/v1/items/{id}/touch", [](const HttpRequest& r) {
        return HttpReply{200,
                         "touched " + r.params.at("id") + " with " + r.body,
                         {{"Content-Type", "text/plain"}}};
    });
    fake.route("GET", "/v1/broken",
               [](const HttpRequest&) -> HttpReply { throw std::runtime_error("no such thing"); });

    Client c(fake.port());
    Answer a = c.send("GET", "/v1/items?page=2", "", "Bearer t0k");
    CHECK(a.status == 200);
    CHECK(a.body == "[1,2]");
    CHECK(a.content_type == "application/json");
    a = c.send("POST", "/v1/items/i7/touch", "{}");
    CHECK(a.status == 200);
    CHECK(a.body == "touched i7 with {}");
    CHECK(a.content_type == "text/plain");
    a = c.send("GET", "/v1/nothing");
    CHECK(a.status == 404);
    CHECK(a.body.find("no route for GET /v1/nothing") != std::string::npos);
    a = c.send("DELETE", "/v1/items");
    CHECK(a.status == 405);
    a = c.send("GET", "/v1/broken");
    CHECK(a.status == 500);
    CHECK(a.body.find("no such thing") != std::string::npos);

    CHECK(fake.connections() == 1);  // five requests, one connection
    auto log = fake.requests();
    REQUIRE(log.size() == 5);
    CHECK(log[0].method == "GET");
    CHECK(log[0].path == "/v1/items");
    CHECK(log[0].query == "page=2");
    CHECK(log[0].header("authorization") == "Bearer t0k");
    CHECK(log[1].body == "{}");
    CHECK(log[1].params.at("id") == "i7");
    CHECK(fake.count("GET", "/*") == 3);
    CHECK(fake.count("*", "/v1/items/{id}/touch") == 1);
}

TEST_CASE("http fake: a fault answers the next N matching requests, then the route",
          "[fake][http]") {
    HttpFake fake;
    int served = 0;
    fake.route("*", "/v1/things/{id}", [&](const HttpRequest&) {
        ++served;
        return HttpReply{200, "ok"};
    });
    fake.inject_fault(HttpFault{.method = "POST",
                                .path = "/v1/things/{id}",
                                .reply = {429, R"({"error":"slow down"})"},
                                .count = 2});
    Client c(fake.port());
    CHECK(c.send("GET", "/v1/things/a").status == 200);  // other method: not matched
    CHECK(c.send("POST", "/v1/things/a").status == 429);
    Answer a = c.send("POST", "/v1/things/b");
    CHECK(a.status == 429);
    CHECK(a.body == R"({"error":"slow down"})");
    CHECK(c.send("POST", "/v1/things/c").status == 200);  // used up
    CHECK(served == 2);
    CHECK(fake.requests().size() == 4);  // faulted requests are logged too
}

TEST_CASE("http fake: stops in bounded time with a slow answer and an idle client",
          "[fake][http]") {
    auto start = std::chrono::steady_clock::now();
    std::thread client;
    {
        HttpFake fake;
        fake.route("GET", "/slow", [](const HttpRequest&) {
            return HttpReply{200, "late", {}, 20s};
        });
        const unsigned short port = fake.port();
        client = std::thread([port] {
            try {
                Client c(port);
                (void)c.send("GET", "/slow");
            } catch (const std::exception&) {
                // The server went away: expected.
            }
        });
        // An idle connection too.
        boost::asio::io_context io;
        tcp::socket idle(io);
        idle.connect({boost::asio::ip::make_address("127.0.0.1"), port});
        for (int i = 0; i < 100 && fake.requests().empty(); ++i) std::this_thread::sleep_for(10ms);
        REQUIRE(fake.requests().size() == 1);
    }
    client.join();
    CHECK(std::chrono::steady_clock::now() - start < 5s);
}
