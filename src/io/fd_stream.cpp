#include "io/fd_stream.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>
#include <cerrno>

namespace sky::detail::io {

namespace {
// The protocol of a connected socket `fd` as Asio's generic socket needs it.
boost::asio::generic::stream_protocol protocol_of(int fd) {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) addr.ss_family = AF_UNIX;
    return {addr.ss_family, 0};
}
}  // namespace

FdStream::FdStream(int fd, std::string description)
    : strand_(boost::asio::make_strand(executor())),
      socket_(context(), protocol_of(fd), fd),
      fd_(fd),
      description_(std::move(description)) {
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // fails harmlessly on Unix
    // Large socket buffers: a call's arguments and a result move in few system calls.
    int size = 4 << 20;
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
    boost::system::error_code ignored;
    socket_.non_blocking(true, ignored);
}

FdStream::~FdStream() {
    boost::system::error_code ignored;
    socket_.close(ignored);
}

void FdStream::async_read_some(boost::asio::mutable_buffer buffer, IoHandler handler) {
    if (closed_.load(std::memory_order_acquire))
        return boost::asio::post(strand_, [h = std::move(handler)]() mutable {
            std::move(h)(boost::asio::error::operation_aborted, std::size_t{0});
        });
    socket_.async_read_some(buffer, boost::asio::bind_executor(strand_, std::move(handler)));
}

void FdStream::async_write_some(std::span<const boost::asio::const_buffer> buffers,
                                IoHandler handler) {
    if (closed_.load(std::memory_order_acquire))
        return boost::asio::post(strand_, [h = std::move(handler)]() mutable {
            std::move(h)(boost::asio::error::operation_aborted, std::size_t{0});
        });
    socket_.async_write_some(buffers, boost::asio::bind_executor(strand_, std::move(handler)));
}

std::size_t FdStream::try_write_some(std::span<const boost::asio::const_buffer> buffers) {
    if (closed_.load(std::memory_order_acquire)) return 0;
    iovec iov[IOV_MAX];
    std::size_t n = 0;
    for (const auto& b : buffers) {
        if (n == IOV_MAX) break;
        if (b.size() == 0) continue;
        iov[n++] = {const_cast<void*>(b.data()), b.size()};
    }
    if (n == 0) return 0;
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = n;
    for (;;) {
        const ssize_t w = ::sendmsg(fd_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w >= 0) return static_cast<std::size_t>(w);
        if (errno == EINTR) continue;
        return 0;  // EAGAIN, or an error the asynchronous write reports
    }
}

void FdStream::close() noexcept {
    if (closed_.exchange(true, std::memory_order_acq_rel)) return;
    // shutdown(2) is safe from any thread while operations are in flight: the reactor sees the
    // socket readable (end of stream) and writable (an error), so each completes on its strand.
    ::shutdown(fd_, SHUT_RDWR);
}

}  // namespace sky::detail::io
