#pragma once
/// \file A real HTTP/1.1 server on 127.0.0.1 (Boost.Beast) for tests: each request is answered by
/// a handler, every request is recorded, and the server thread stops in bounded time.
#include <poll.h>

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace sky::test {

struct RecordedRequest {
    std::string method;
    std::string target;
    std::vector<std::pair<std::string, std::string>> headers;
    std::string body;

    [[nodiscard]] std::string header(const std::string& name) const {
        for (const auto& [key, value] : headers) {
            if (boost::beast::iequals(key, name)) return value;
        }
        return {};
    }
};

struct Reply {
    int status = 200;
    std::string body;
    std::vector<std::pair<std::string, std::string>> headers;
    /// Wait this long before answering (bounded; cut short when the server stops).
    std::chrono::milliseconds delay{0};
};

class LoopbackServer {
public:
    using Handler = std::function<Reply(const RecordedRequest&)>;

    explicit LoopbackServer(Handler handler)
        : handler_(std::move(handler)),
          acceptor_(io_, {boost::asio::ip::make_address("127.0.0.1"), 0}) {
        port_ = acceptor_.local_endpoint().port();
        thread_ = std::thread([this] { run(); });
    }
    ~LoopbackServer() {
        stop_ = true;
        thread_.join();
    }
    LoopbackServer(const LoopbackServer&) = delete;
    LoopbackServer& operator=(const LoopbackServer&) = delete;

    [[nodiscard]] unsigned short port() const { return port_; }
    [[nodiscard]] std::string url(const std::string& target = "/") const {
        return "http://127.0.0.1:" + std::to_string(port_) + target;
    }
    [[nodiscard]] std::vector<RecordedRequest> requests() const {
        std::lock_guard lock(mutex_);
        return requests_;
    }

private:
    void run() {
        namespace http = boost::beast::http;
        while (!stop_) {
            pollfd fd{acceptor_.native_handle(), POLLIN, 0};
            if (::poll(&fd, 1, 50) <= 0) continue;
            boost::asio::ip::tcp::socket socket(io_);
            boost::system::error_code ec;
            acceptor_.accept(socket, ec);
            if (ec) continue;
            // A client that connects and says nothing must not hang the server.
            timeval tv{2, 0};
            ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
            boost::beast::flat_buffer buffer;
            http::request<http::string_body> request;
            http::read(socket, buffer, request, ec);
            if (ec) continue;
            RecordedRequest recorded;
            recorded.method = std::string(request.method_string());
            recorded.target = std::string(request.target());
            for (const auto& field : request) {
                recorded.headers.emplace_back(std::string(field.name_string()),
                                              std::string(field.value()));
            }
            recorded.body = request.body();
            {
                std::lock_guard lock(mutex_);
                requests_.push_back(recorded);
            }
            Reply reply = handler_(recorded);
            for (auto waited = std::chrono::milliseconds(0); waited < reply.delay && !stop_;
                 waited += std::chrono::milliseconds(10)) {
                std::this_thread::sleep_for(std::chrono::milliseconds(10));
            }
            http::response<http::string_body> response{static_cast<http::status>(reply.status), 11};
            response.set(http::field::server, "sky-test");
            response.set(http::field::connection, "close");
            for (const auto& [key, value] : reply.headers) response.set(key, value);
            response.body() = reply.body;
            response.prepare_payload();
            http::write(socket, response, ec);
            socket.shutdown(boost::asio::ip::tcp::socket::shutdown_both, ec);
        }
    }

    Handler handler_;
    boost::asio::io_context io_;
    boost::asio::ip::tcp::acceptor acceptor_;
    unsigned short port_ = 0;
    std::atomic<bool> stop_{false};
    mutable std::mutex mutex_;
    std::vector<RecordedRequest> requests_;
    std::thread thread_;
};

}  // namespace sky::test
