#pragma once
// What the SSH layer's e2e tests share: session options for a test host, random payloads, an
// echo server on a host (python, or this process inside the host's namespace), and an echo
// through a blocking transport.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/evp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <future>
#include <mutex>
#include <random>
#include <thread>

#include "hosts/test_hosts.hpp"
#include "ssh/session.hpp"

namespace ssh_support {

using namespace sky::detail::ssh;
using sky::test::TestHosts;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

inline SessionOptions options_for(const TestHosts& hosts, int i) {
    SessionOptions o;
    o.host = hosts.address(i);
    o.port = hosts.port(i);
    o.user = hosts.user();
    o.private_key_file = hosts.client_key_path();
    o.host_key = HostKeyPin::fingerprint(hosts.host_key_fingerprint(i));
    o.connect_timeout = milliseconds(5000);
    return o;
}

inline std::vector<std::byte> random_bytes(std::size_t n, unsigned seed) {
    std::vector<std::byte> v(n);
    std::mt19937_64 rng(seed);
    for (std::size_t i = 0; i + 8 <= n; i += 8) {
        std::uint64_t x = rng();
        std::memcpy(v.data() + i, &x, 8);
    }
    return v;
}

inline std::string sha256_hex(std::span<const std::byte> data) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
    static const char* hex = "0123456789abcdef";
    std::string s;
    for (unsigned i = 0; i < len; ++i) {
        s += hex[md[i] >> 4];
        s += hex[md[i] & 15];
    }
    return s;
}

inline std::string trim(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
}

// A threaded TCP echo server for the node side, run with the node's python3.
inline constexpr const char* kEchoServer = R"PY(
import socket, sys, threading
srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", int(sys.argv[1])))
srv.listen(64)
def serve(c):
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        while True:
            d = c.recv(1 << 20)
            if not d:
                break
            c.sendall(d)
    finally:
        c.close()
while True:
    c, _ = srv.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
)PY";

// Uploads and starts the echo server on 127.0.0.1:port of the node; waits until it accepts.
// Returns its pid. Relative paths land in the host's private home.
inline long start_echo_server(Session& s, std::uint16_t port) {
    s.upload(std::string_view(kEchoServer), "sky_echo.py", 0644);
    auto r = s.exec("nohup python3 sky_echo.py " + std::to_string(port) +
                    " >sky_echo.log 2>&1 </dev/null & echo $!");
    REQUIRE(r.exit_status == 0);
    long pid = std::stol(r.out);
    auto deadline = Clock::now() + std::chrono::seconds(10);
    for (int i = 0; i < 200; ++i) {
        try {
            auto t = s.open_tunnel("127.0.0.1", port, std::chrono::seconds(5));
            return pid;
        } catch (const ChannelError&) {
            if (Clock::now() > deadline) throw;
            std::this_thread::sleep_for(milliseconds(50));
        }
    }
    FAIL("echo server did not start: " << s.exec("cat sky_echo.log").out);
    return 0;
}

// Sends `data` through the transport while a second thread reads it back; returns what came back.
inline std::vector<std::byte> echo_through(sky::detail::Transport& t,
                                           const std::vector<std::byte>& data,
                                           std::size_t write_chunk) {
    std::vector<std::byte> back(data.size());
    std::size_t got = 0;
    std::exception_ptr reader_error;
    std::thread reader([&] {
        try {
            while (got < back.size()) {
                std::size_t n = t.read_some(std::span(back).subspan(got));
                if (n == 0) break;
                got += n;
            }
        } catch (...) {
            reader_error = std::current_exception();
        }
    });
    for (std::size_t off = 0; off < data.size(); off += write_chunk) {
        std::span<const std::byte> piece(data.data() + off,
                                         std::min(write_chunk, data.size() - off));
        std::span<const std::byte> bufs[] = {piece};
        t.write_all(bufs);
    }
    reader.join();
    if (reader_error) std::rethrow_exception(reader_error);
    back.resize(got);
    return back;
}

// A C++ echo server on 127.0.0.1:port inside a test host's namespace, served by this process:
// fast enough that a benchmark measures the SSH path, not the echo.
class NetnsEchoServer {
public:
    NetnsEchoServer(const TestHosts& hosts, int host, std::uint16_t port) {
        std::promise<void> ready;
        auto started = ready.get_future();
        acceptor_ = std::thread([this, &hosts, host, port, &ready] {
            try {
                hosts.enter_netns(host);
                listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
                int one = 1;
                ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
                sockaddr_in sa{};
                sa.sin_family = AF_INET;
                sa.sin_port = htons(port);
                sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
                if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ||
                    ::listen(listen_fd_, 16) != 0) {
                    throw std::runtime_error("echo server: bind/listen failed");
                }
                ready.set_value();
            } catch (...) {
                ready.set_exception(std::current_exception());
                return;
            }
            for (;;) {
                int c = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
                if (c < 0) return;  // shut down
                std::lock_guard lk(mu_);
                conns_.push_back(c);
                workers_.emplace_back([c] {
                    int one = 1;
                    ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    std::vector<char> buf(1 << 20);
                    for (;;) {
                        auto n = ::recv(c, buf.data(), buf.size(), 0);
                        if (n <= 0) return;
                        for (ssize_t off = 0; off < n;) {
                            auto w = ::send(c, buf.data() + off, static_cast<std::size_t>(n - off),
                                            MSG_NOSIGNAL);
                            if (w <= 0) return;
                            off += w;
                        }
                    }
                });
            }
        });
        started.get();
    }
    ~NetnsEchoServer() {
        ::shutdown(listen_fd_, SHUT_RDWR);
        acceptor_.join();
        ::close(listen_fd_);
        std::lock_guard lk(mu_);
        for (int c : conns_) ::shutdown(c, SHUT_RDWR);
        for (auto& w : workers_) w.join();
        for (int c : conns_) ::close(c);
    }

private:
    int listen_fd_ = -1;
    std::thread acceptor_;
    std::mutex mu_;
    std::vector<int> conns_;
    std::vector<std::thread> workers_;
};

}  // namespace ssh_support
