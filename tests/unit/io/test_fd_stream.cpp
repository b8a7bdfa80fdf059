// io::FdStream: the stream every Local worker's socket pair (and Slurm's TCP hop) is. A write to a
// peer that has gone must be an error the pool handles (a lost node), never SIGPIPE, whose
// default action ends the user's whole program.
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <boost/asio/buffer.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <future>
#include <string>

#include "io/fd_stream.hpp"

namespace io = sky::detail::io;

TEST_CASE("fd stream: a write to a closed peer is an error, not SIGPIPE", "[io]") {
    // The test process keeps SIGPIPE's default action: were it raised, ctest would see the
    // process killed by the signal instead of a failed or passed check.
    REQUIRE(std::signal(SIGPIPE, SIG_DFL) != SIG_ERR);
    int fds[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
    io::FdStream stream(fds[0], "test socket");
    ::close(fds[1]);
    const std::string payload(1 << 20, 'x');
    const std::array<boost::asio::const_buffer, 1> buffers{boost::asio::buffer(payload)};

    // The synchronous path the blocking forms use.
    CHECK(stream.try_write_some(buffers) == 0);

    // The asynchronous path on the I/O core: a write and then another, as a writer queue does.
    for (int round = 0; round < 2; ++round) {
        std::promise<boost::system::error_code> done;
        stream.async_write_some(
            buffers, [&](boost::system::error_code ec, std::size_t) { done.set_value(ec); });
        auto f = done.get_future();
        REQUIRE(f.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
        const auto ec = f.get();
        INFO("round " << round << ": " << ec.message());
        CHECK(ec == boost::asio::error::broken_pipe);
    }
}
