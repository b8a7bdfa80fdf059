#pragma once
/// \file Probing a pool's network (security review r4 H1, M5): a function every node runs to
/// listen on a port, one that says whether a node reaches an address and port, and the same
/// question asked from a test host's network namespace (a stranger on the pool's network) or
/// from this machine (the client). Header-only: the cloud tests that ship their binary to test
/// hosts register the node functions by including it.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <string>
#include <thread>

#include "hosts/test_hosts.hpp"

namespace network_probe {

/// On a node: listens on a free port of every address for `seconds` (answering "hi" to whoever
/// connects), as a rendezvous service or anything the user's function serves would; the port.
inline int listen_for(int seconds) {
    const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    socklen_t len = sizeof a;
    if (s < 0 || ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(s, 16) != 0 || ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) != 0)
        return -1;
    std::thread([s, seconds] {
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
        timeval tv{1, 0};
        ::setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        while (std::chrono::steady_clock::now() < until) {
            const int c = ::accept(s, nullptr, nullptr);
            if (c < 0) continue;
            (void)::send(c, "hi", 2, MSG_NOSIGNAL);
            ::close(c);
        }
        ::close(s);
    }).detach();
    return ntohs(a.sin_port);
}

/// On a node: whether it reaches address:port within 3 s.
inline bool reaches(std::string address, int port) {
    const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    ::inet_pton(AF_INET, address.c_str(), &a.sin_addr);
    bool ok = false;
    if (::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
        ok = true;
    } else if (errno == EINPROGRESS) {
        pollfd p{s, POLLOUT, 0};
        int err = 0;
        socklen_t el = sizeof err;
        ok = ::poll(&p, 1, 3000) == 1 && ::getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &el) == 0 &&
             err == 0;
    }
    ::close(s);
    return ok;
}

/// Whether network namespace `ns` (empty: this machine's) reaches address:port within 3 s.
inline bool from_namespace_reaches(const std::string& ns, const std::string& address, int port) {
    std::vector<std::string> argv;
    if (!ns.empty()) argv = {"ip", "netns", "exec", ns};
    for (const char* a : {"timeout", "3", "bash", "-c", "exec 3<>\"/dev/tcp/$0/$1\""})
        argv.emplace_back(a);
    argv.push_back(address);
    argv.push_back(std::to_string(port));
    return sky::test::run_command(argv, std::chrono::seconds(10)).status == 0;
}

/// This machine's address on the test hosts' bridge (the client, as the nodes see it).
inline std::string client_address(const sky::test::TestHosts& hosts) {
    return hosts.address(0).substr(0, hosts.address(0).rfind('.')) + ".1";
}

}  // namespace network_probe
