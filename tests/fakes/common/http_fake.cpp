// The shared HTTP server of the provider fakes: an accept thread and one thread per connection,
// every wait bounded so that the destructor ends in bounded time.
#include "fakes/common/http_fake.hpp"

#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "util/encoding.hpp"
#include "util/text.hpp"

namespace sky::test {

namespace {

namespace http = boost::beast::http;
using boost::asio::ip::tcp;

std::vector<std::string_view> segments(std::string_view path) {
    std::vector<std::string_view> out;
    if (!path.empty() && path.front() == '/') path.remove_prefix(1);
    for (;;) {
        const auto slash = path.find('/');
        out.push_back(path.substr(0, slash));
        if (slash == std::string_view::npos) break;
        path.remove_prefix(slash + 1);
    }
    return out;
}

bool method_matches(std::string_view pattern, std::string_view method) {
    return pattern == "*" || pattern == method;
}

HttpReply error_reply(int status, const std::string& message) {
    return {status, nlohmann::json{{"error", message}}.dump()};
}

// The answer of a fault that refuses the request before anything happens.
HttpReply refusal(FaultKind kind, const HttpFaultRate& rate, const HttpRequest& request,
                  FaultDice& dice) {
    switch (kind) {
        case FaultKind::server_error:
            switch (dice.pick(3)) {
                case 0:
                    return error_reply(500, "internal server error");
                case 1:
                    return {502,
                            "<html><body><h1>502 Bad Gateway</h1></body></html>",
                            {{"Content-Type", "text/html"}}};
                default:
                    return error_reply(503, "service unavailable, try again");
            }
        case FaultKind::throttled: {
            HttpReply r = error_reply(429, "too many requests");
            r.headers.emplace_back("Retry-After", "1");
            return r;
        }
        case FaultKind::capacity:
            return rate.capacity ? rate.capacity(request) : error_reply(503, "no capacity");
        case FaultKind::expired_auth:
            return rate.expired_auth ? rate.expired_auth(request)
                                     : error_reply(401, "the access token expired");
        default:
            return {};
    }
}

void write_truncated(int fd, const http::response<http::string_body>& response) {
    // The head announces the whole body (plus a margin when it is short); half of it is sent.
    const std::string& body = response.body();
    std::string head =
        fmt::format("HTTP/1.1 {} {}\r\n", response.result_int(), std::string(response.reason()));
    for (const auto& field : response) {
        if (field.name() == http::field::content_length || field.name() == http::field::connection)
            continue;
        head +=
            fmt::format("{}: {}\r\n", std::string(field.name_string()), std::string(field.value()));
    }
    head += fmt::format("Content-Length: {}\r\nConnection: close\r\n\r\n", body.size() + 64);
    head += body.substr(0, body.size() / 2);
    for (std::size_t sent = 0; sent < head.size();) {
        const auto n = ::send(fd, head.data() + sent, head.size() - sent, MSG_NOSIGNAL);
        if (n <= 0) return;
        sent += static_cast<std::size_t>(n);
    }
}

bool refuses(FaultKind kind) {
    return kind == FaultKind::server_error || kind == FaultKind::throttled ||
           kind == FaultKind::capacity || kind == FaultKind::expired_auth;
}

}  // namespace

std::string HttpRequest::header(std::string_view name) const {
    for (const auto& [key, value] : headers)
        if (sky::detail::iequals(key, name)) return value;
    return {};
}

std::map<std::string, std::string> HttpRequest::query_params() const {
    std::map<std::string, std::string> out;
    std::size_t pos = 0;
    while (!query.empty()) {
        auto amp = query.find('&', pos);
        std::string part =
            query.substr(pos, amp == std::string::npos ? std::string::npos : amp - pos);
        auto eq = part.find('=');
        if (!part.empty())
            out[sky::detail::url_decode(part.substr(0, eq))] =
                eq == std::string::npos ? "" : sky::detail::url_decode(part.substr(eq + 1));
        if (amp == std::string::npos) break;
        pos = amp + 1;
    }
    return out;
}

bool match_path(std::string_view pattern, std::string_view path,
                std::map<std::string, std::string>* params) {
    const auto want = segments(pattern);
    const auto have = segments(path);
    std::map<std::string, std::string> found;
    for (std::size_t i = 0; i < want.size(); ++i) {
        if (want[i] == "*" && i + 1 == want.size()) {
            if (params) *params = std::move(found);
            return true;
        }
        if (i >= have.size()) return false;
        if (want[i].size() > 2 && want[i].front() == '{' && want[i].back() == '}') {
            if (have[i].empty()) return false;
            found[std::string(want[i].substr(1, want[i].size() - 2))] =
                sky::detail::url_decode(have[i]);
        } else if (want[i] != have[i]) {
            return false;
        }
    }
    if (want.size() != have.size()) return false;
    if (params) *params = std::move(found);
    return true;
}

struct HttpFake::Net {
    boost::asio::io_context io;
    tcp::acceptor acceptor{io, {boost::asio::ip::make_address("127.0.0.1"), 0}};
    std::mutex fds_mutex;
    std::set<int> open_fds;  // connections, shut down by the destructor to end blocked reads
};

HttpFake::HttpFake(HttpFakeOptions options)
    : options_(std::move(options)), net_(std::make_unique<Net>()) {
    port_ = net_->acceptor.local_endpoint().port();
    acceptor_ = std::thread([this] { accept_loop(); });
}

HttpFake::~HttpFake() {
    stop_ = true;
    acceptor_.join();
    {
        std::lock_guard lock(net_->fds_mutex);
        for (int fd : net_->open_fds) ::shutdown(fd, SHUT_RDWR);
    }
    std::lock_guard lock(threads_mutex_);
    for (auto& c : threads_) c.thread.join();
}

std::string HttpFake::url(std::string_view target) const {
    return "http://127.0.0.1:" + std::to_string(port_) + std::string(target);
}

void HttpFake::route(std::string method, std::string pattern, Handler handler) {
    std::lock_guard lock(mutex_);
    routes_.push_back({std::move(method), std::move(pattern), std::move(handler)});
}

void HttpFake::inject_fault(HttpFault fault) {
    std::lock_guard lock(mutex_);
    faults_.push_back(std::move(fault));
}

std::uint64_t HttpFake::add_fault_rate(HttpFaultRate rate) {
    auto dice =
        std::make_shared<FaultDice>(options_.server, rate.kinds, rate.probability, rate.seed);
    std::lock_guard lock(mutex_);
    rates_.push_back({std::move(rate), dice});
    return dice->seed();
}

void HttpFake::clear_fault_rates() {
    std::lock_guard lock(mutex_);
    rates_.clear();
}

int HttpFake::fault_hits(FaultKind kind) const {
    std::lock_guard lock(mutex_);
    return rate_hits_[static_cast<std::size_t>(kind)];
}

std::vector<HttpRequest> HttpFake::requests() const {
    std::lock_guard lock(mutex_);
    return log_;
}

int HttpFake::count(std::string_view method, std::string_view pattern) const {
    std::lock_guard lock(mutex_);
    int n = 0;
    for (const auto& r : log_)
        if (method_matches(method, r.method) && match_path(pattern, r.path)) ++n;
    return n;
}

void HttpFake::wait(std::chrono::milliseconds delay) const {
    const auto step = std::chrono::milliseconds(10);
    for (auto waited = std::chrono::milliseconds(0); waited < delay && !stop_; waited += step)
        std::this_thread::sleep_for(step);
}

HttpReply HttpFake::handle(HttpRequest request) {
    const auto q = request.target.find('?');
    request.path = request.target.substr(0, q);
    request.query = q == std::string::npos ? "" : request.target.substr(q + 1);
    std::optional<HttpReply> fault;
    std::optional<FaultKind> spoil;  // a rate's fault that lets the handler run
    const Route* route = nullptr;
    bool path_known = false;
    Handler handler;
    {
        std::lock_guard lock(mutex_);
        for (auto it = faults_.begin(); it != faults_.end(); ++it) {
            if (!method_matches(it->method, request.method) || !match_path(it->path, request.path))
                continue;
            fault = it->reply;
            if (--it->count <= 0) faults_.erase(it);
            break;
        }
        for (auto& rate : rates_) {
            if (fault) break;
            const auto& r = rate.spec;
            if (!method_matches(r.method, request.method) || !match_path(r.path, request.path))
                continue;
            if (r.when && !r.when(request)) continue;
            auto kind = rate.dice->roll();
            if (!kind) continue;
            ++rate_hits_[static_cast<std::size_t>(*kind)];
            if (refuses(*kind)) {
                fault = refusal(*kind, r, request, *rate.dice);
            } else {
                spoil = kind;
            }
            break;
        }
        for (const auto& r : routes_) {
            std::map<std::string, std::string> params;
            if (!match_path(r.pattern, request.path, &params)) continue;
            path_known = true;
            if (!method_matches(r.method, request.method)) continue;
            route = &r;
            handler = r.handler;  // a copy: routes_ may grow while it runs
            request.params = std::move(params);
            break;
        }
        log_.push_back(request);
    }
    HttpReply reply;
    if (fault) {
        reply = std::move(*fault);
    } else if (!route) {
        reply = path_known
                    ? error_reply(405, request.method + " is not allowed on " + request.path)
                    : error_reply(404, "no route for " + request.method + " " + request.path);
    } else {
        try {
            reply = handler(request);
        } catch (const std::exception& e) {
            reply = error_reply(500, std::string("fake bug: ") + e.what());
        }
    }
    if (spoil == FaultKind::stall) reply.delivery = HttpReply::Delivery::stall;
    if (spoil == FaultKind::truncated) reply.delivery = HttpReply::Delivery::truncated;
    if (spoil == FaultKind::malformed) {
        // A 2xx that cannot be read: the request's effect happened, the client cannot know it.
        if (reply.status < 200 || reply.status >= 300 || reply.status == 204) reply.status = 200;
        reply.body = malformed_body(reply.body);
    }
    wait(reply.delay);
    return reply;
}

void HttpFake::accept_loop() {
    while (!stop_) {
        {
            // Reap the threads of connections that ended: a long test opens many.
            std::lock_guard lock(threads_mutex_);
            std::erase_if(threads_, [](Connection& c) {
                if (!c.done->load()) return false;
                c.thread.join();
                return true;
            });
        }
        pollfd p{net_->acceptor.native_handle(), POLLIN, 0};
        if (::poll(&p, 1, 50) <= 0) continue;
        const int fd = ::accept4(net_->acceptor.native_handle(), nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) continue;
        ++connections_accepted_;
        {
            std::lock_guard lock(net_->fds_mutex);
            net_->open_fds.insert(fd);
        }
        auto done = std::make_shared<std::atomic<bool>>(false);
        std::lock_guard lock(threads_mutex_);
        threads_.push_back({std::thread([this, fd, done] {
                                serve(fd);
                                done->store(true);
                            }),
                            done});
    }
}

void HttpFake::stall(int fd) const {
    // Bounded: 10 minutes at most, 100 ms per wait, ended by the client's close or our stop.
    for (int waited = 0; !stop_ && waited < 600000; waited += 100) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 100) <= 0) continue;
        char byte;
        if (::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) <= 0) return;  // closed or reset
        // More bytes (a pipelined request): drain and go on waiting; it is never answered.
        char sink[4096];
        if (::recv(fd, sink, sizeof sink, MSG_DONTWAIT) <= 0) return;
    }
}

void HttpFake::serve(int fd) {
    boost::asio::io_context io;
    tcp::socket socket(io);
    boost::system::error_code ec;
    socket.assign(tcp::v4(), fd, ec);
    if (ec) {
        std::lock_guard lock(net_->fds_mutex);
        net_->open_fds.erase(fd);
        ::close(fd);
        return;
    }
    // A request that starts must arrive whole within 5 s: a client that stalls cannot hang us.
    timeval tv{5, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    boost::beast::flat_buffer buffer;
    // Keep-alive: serve requests until the client closes, the idle limit passes, or we stop.
    for (auto idle = std::chrono::milliseconds(0); !stop_ && idle < options_.idle_timeout;) {
        if (buffer.size() == 0) {
            pollfd p{fd, POLLIN, 0};
            if (::poll(&p, 1, 100) <= 0) {
                idle += std::chrono::milliseconds(100);
                continue;
            }
        }
        idle = std::chrono::milliseconds(0);
        http::request<http::string_body> request;
        http::read(socket, buffer, request, ec);
        if (ec) break;
        HttpRequest r;
        r.method = std::string(request.method_string());
        r.target = std::string(request.target());
        for (const auto& field : request)
            r.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
        r.body = request.body();
        HttpReply reply = handle(std::move(r));
        if (reply.delivery == HttpReply::Delivery::stall) {
            // Never answer: hold the connection until the client gives up (closes) or we stop.
            stall(fd);
            break;
        }
        http::response<http::string_body> response{static_cast<http::status>(reply.status),
                                                   request.version()};
        response.set(http::field::server, options_.server);
        response.set(http::field::content_type, options_.content_type);
        response.keep_alive(request.keep_alive() && !stop_);
        for (const auto& [name, value] : reply.headers) response.set(name, value);
        response.body() = std::move(reply.body);
        response.prepare_payload();
        if (reply.delivery == HttpReply::Delivery::truncated) {
            write_truncated(fd, response);
            break;
        }
        http::write(socket, response, ec);
        if (ec || !response.keep_alive()) break;
    }
    socket.shutdown(tcp::socket::shutdown_both, ec);
    std::lock_guard lock(net_->fds_mutex);
    net_->open_fds.erase(fd);
    socket.close(ec);  // closes fd, after it left the set: the destructor never shuts a reused fd
}

}  // namespace sky::test
