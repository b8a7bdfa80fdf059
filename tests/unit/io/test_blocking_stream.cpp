// io::BlockingStream: a runtime Transport over an io::Stream, here a socket pair whose far end
// the test reads and writes itself.
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <future>
#include <thread>

#include "io/blocking_stream.hpp"
#include "io/io_core.hpp"
#include "sky/errors.hpp"

namespace io = sky::detail::io;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

// An io::Stream over one end of a socket pair, on a strand of the I/O core.
class SocketStream final : public io::Stream {
public:
    explicit SocketStream(int fd)
        : strand_(boost::asio::make_strand(io::executor())),
          sd_(std::make_shared<boost::asio::posix::stream_descriptor>(strand_, fd)) {}
    ~SocketStream() override { close(); }
    executor_type get_executor() override { return strand_; }
    void async_read_some(boost::asio::mutable_buffer b, io::IoHandler h) override {
        sd_->async_read_some(b, std::move(h));
    }
    void async_write_some(std::span<const boost::asio::const_buffer> bufs,
                          io::IoHandler h) override {
        sd_->async_write_some(std::vector<boost::asio::const_buffer>(bufs.begin(), bufs.end()),
                              std::move(h));
    }
    void close() noexcept override {
        boost::asio::post(strand_, [sd = sd_] {
            boost::system::error_code ignored;
            sd->close(ignored);
        });
    }
    [[nodiscard]] std::string describe() const override { return "test socket"; }
    [[nodiscard]] std::string failure() const override { return "the test's reason"; }

private:
    boost::asio::strand<boost::asio::io_context::executor_type> strand_;
    std::shared_ptr<boost::asio::posix::stream_descriptor> sd_;
};

struct Pair {
    int far = -1;
    std::unique_ptr<io::BlockingStream> near;
    explicit Pair(io::BlockingStream::Raise raise = {}) {
        int fds[2];
        REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
        far = fds[1];
        near = std::make_unique<io::BlockingStream>(std::make_unique<SocketStream>(fds[0]),
                                                    std::move(raise));
    }
    ~Pair() {
        near.reset();
        ::close(far);
    }
    void send(std::string_view s) const {
        REQUIRE(::send(far, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size()));
    }
    std::string take(std::size_t n) const {
        std::string s(n, '\0');
        std::size_t got = 0;
        while (got < n) {
            auto k = ::recv(far, s.data() + got, n - got, 0);
            REQUIRE(k > 0);
            got += static_cast<std::size_t>(k);
        }
        return s;
    }
    std::string read(std::size_t max) const {
        std::string s(max, '\0');
        auto n = near->read_some(std::as_writable_bytes(std::span(s.data(), s.size())));
        s.resize(n);
        return s;
    }
};

}  // namespace

TEST_CASE("blocking stream: reads and gathered writes go through the stream", "[io]") {
    Pair p;
    CHECK(p.near->describe() == "test socket");
    std::string a = "hello ", b = "stream";
    std::span<const std::byte> bufs[] = {std::as_bytes(std::span(a)), std::as_bytes(std::span(b))};
    p.near->write_all(bufs);
    CHECK(p.take(12) == "hello stream");
    // A write larger than the socket buffers completes once the far end reads it all.
    std::string big(8u << 20, 'z');
    std::span<const std::byte> one[] = {std::as_bytes(std::span(big))};
    auto drained = std::async(std::launch::async, [&] { return p.take(big.size()); });
    p.near->write_all(one);
    CHECK(drained.get() == big);
    p.send("back");
    std::string got;
    while (got.size() < 4) got += p.read(16);
    CHECK(got == "back");
}

TEST_CASE("blocking stream: wait_readable is bounded and keeps what it read", "[io]") {
    Pair p;
    auto t0 = Clock::now();
    CHECK_FALSE(p.near->wait_readable(milliseconds(100)));
    CHECK(Clock::now() - t0 >= milliseconds(100));
    CHECK(Clock::now() - t0 < std::chrono::seconds(5));
    p.send("abcdef");
    CHECK(p.near->wait_readable(std::chrono::seconds(5)));
    CHECK(p.near->wait_readable(milliseconds(1)));  // still there
    CHECK(p.read(2) == "ab");
    CHECK(p.read(16) == "cdef");
}

TEST_CASE("blocking stream: end of stream, shutdown and errors", "[io]") {
    SECTION("the far end closing is a read of 0") {
        Pair p;
        ::shutdown(p.far, SHUT_WR);
        CHECK(p.read(16).empty());
    }
    SECTION("shutdown ends a blocked read with 0; a later write throws sky::Error") {
        Pair p;
        auto reader = std::async(std::launch::async, [&] { return p.read(16); });
        std::this_thread::sleep_for(milliseconds(100));
        auto t0 = Clock::now();
        p.near->shutdown();
        CHECK(reader.get().empty());
        CHECK(Clock::now() - t0 < std::chrono::seconds(5));
        std::string x = "x";
        std::span<const std::byte> bufs[] = {std::as_bytes(std::span(x))};
        try {
            p.near->write_all(bufs);
            FAIL("wrote after shutdown");
        } catch (const sky::Error& e) {
            CHECK_THAT(e.what(), Catch::Contains("test socket"));
            CHECK_THAT(e.what(), Catch::Contains("the test's reason"));
        }
    }
    SECTION("the stream's errors go through the caller's mapping") {
        struct Mine : sky::Error {
            using sky::Error::Error;
        };
        boost::system::error_code seen;
        Pair p([&](const boost::system::error_code& ec, const std::string& failure,
                   const std::string& describe) {
            seen = ec;
            throw Mine(describe + " / " + failure);
        });
        p.near->shutdown();
        std::string x = "x";
        std::span<const std::byte> bufs[] = {std::as_bytes(std::span(x))};
        CHECK_THROWS_AS(p.near->write_all(bufs), Mine);
        CHECK(seen);
    }
}

TEST_CASE("blocking stream: refused on a thread of the I/O core", "[io]") {
    Pair p;
    std::promise<std::string> what;
    boost::asio::post(io::executor(), [&] {
        try {
            p.read(4);
            what.set_value("no error");
        } catch (const std::logic_error& e) {
            what.set_value(e.what());
        }
    });
    CHECK_THAT(what.get_future().get(), Catch::Contains("I/O core"));
    p.send("ok");
    CHECK(p.read(4) == "ok");  // nothing was started by the refused call
}
