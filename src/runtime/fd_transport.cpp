#include "runtime/fd_transport.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "sky/errors.hpp"

namespace sky::detail {

FdTransport::FdTransport(int fd, std::string description)
    : fd_(fd), description_(std::move(description)) {
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // fails harmlessly on Unix
    int size = 4 << 20;
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
}

FdTransport::~FdTransport() {
    if (fd_ >= 0) ::close(fd_);
}

std::size_t FdTransport::read_some(std::span<std::byte> buf) {
    for (;;) {
        ssize_t n = ::recv(fd_, buf.data(), buf.size(), 0);
        if (n >= 0) return static_cast<std::size_t>(n);
        if (errno == EINTR) continue;
        if (shut_.load() || errno == ECONNRESET) return 0;
        throw Error(fmt::format("read from {} failed: {}", description_, std::strerror(errno)));
    }
}

void FdTransport::write_all(std::span<const std::span<const std::byte>> bufs) {
    std::vector<iovec> iov;
    iov.reserve(bufs.size());
    for (auto& b : bufs)
        if (!b.empty()) iov.push_back({const_cast<std::byte*>(b.data()), b.size()});
    std::size_t i = 0;
    while (i < iov.size()) {
        msghdr msg{};
        msg.msg_iov = iov.data() + i;
        msg.msg_iovlen = std::min<std::size_t>(iov.size() - i, IOV_MAX);
        ssize_t n = ::sendmsg(fd_, &msg, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR) continue;
            throw Error(fmt::format("write to {} failed: {}", description_, std::strerror(errno)));
        }
        auto left = static_cast<std::size_t>(n);
        while (i < iov.size() && left >= iov[i].iov_len) left -= iov[i++].iov_len;
        if (i < iov.size()) {
            iov[i].iov_base = static_cast<char*>(iov[i].iov_base) + left;
            iov[i].iov_len -= left;
        }
    }
}

void FdTransport::shutdown() noexcept {
    shut_.store(true);
    if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

bool FdTransport::wait_readable(std::chrono::milliseconds timeout) {
    pollfd p{fd_, POLLIN, 0};
    for (;;) {
        int r = ::poll(&p, 1, static_cast<int>(timeout.count()));
        if (r < 0 && errno == EINTR) continue;
        return r > 0;
    }
}

int connect_tcp(const std::string& host, int port, std::chrono::milliseconds timeout) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) throw Error(fmt::format("socket: {}", std::strerror(errno)));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    if (::inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1) {
        ::close(fd);
        throw ConfigError(fmt::format("not an IPv4 address: '{}'", host));
    }
    int r = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    if (r < 0 && errno == EINPROGRESS) {
        pollfd p{fd, POLLOUT, 0};
        r = ::poll(&p, 1, static_cast<int>(timeout.count()));
        int err = 0;
        socklen_t len = sizeof err;
        if (r == 1) ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (r != 1 || err != 0) {
            ::close(fd);
            throw Error(fmt::format("connect to {}:{} failed: {}", host, port,
                                    r == 0 ? "timed out" : std::strerror(err ? err : errno)));
        }
    } else if (r < 0) {
        int e = errno;
        ::close(fd);
        throw Error(fmt::format("connect to {}:{} failed: {}", host, port, std::strerror(e)));
    }
    int flags = 0;
    ::ioctl(fd, FIONBIO, &flags);
    return fd;
}

int connect_unix(const std::string& path) {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    if (path.size() >= sizeof a.sun_path)
        throw ConfigError(fmt::format("Unix socket path too long: '{}'", path));
    std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) throw Error(fmt::format("socket: {}", std::strerror(errno)));
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        int e = errno;
        ::close(fd);
        throw Error(fmt::format("connect to {} failed: {}", path, std::strerror(e)));
    }
    return fd;
}

}  // namespace sky::detail
