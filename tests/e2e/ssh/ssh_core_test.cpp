// The SSH layer on the I/O core: tunnels as io::Streams driven by their own asynchronous
// operations, many at once on one session beside exec; a session that dies completing everything
// it holds; blocking calls refused on an I/O thread; no thread per session or channel.
#include <algorithm>
#include <boost/asio/post.hpp>
#include <catch2/catch.hpp>
#include <filesystem>
#include <future>

#include "e2e/ssh/ssh_support.hpp"
#include "io/io_core.hpp"

using namespace ssh_support;
namespace io = sky::detail::io;

namespace {

// Threads of this process now.
int thread_count() {
    int n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task"))
        ++n;
    return n;
}

// Echoes `data` through a tunnel with the stream's own operations (a write and a read in flight
// at once, every completion on the stream's strand, no thread of the test's). `result` gets
// the bytes that came back, or the error and the stream's failure() text.
struct AsyncEcho : std::enable_shared_from_this<AsyncEcho> {
    struct Outcome {
        std::vector<std::byte> back;
        boost::system::error_code error;
        std::string failure;
        bool completions_on_io_thread = true;
    };
    std::unique_ptr<io::Stream> stream;
    std::vector<std::byte> data;
    std::size_t chunk = 1;
    std::size_t sent = 0;
    Outcome out;
    std::size_t got = 0;
    bool ended = false;
    std::promise<Outcome> result;

    static std::future<Outcome> start(std::unique_ptr<io::Stream> s, std::vector<std::byte> data,
                                      std::size_t chunk) {
        auto e = std::make_shared<AsyncEcho>();
        e->stream = std::move(s);
        e->data = std::move(data);
        e->chunk = chunk;
        e->out.back.resize(e->data.size());
        auto f = e->result.get_future();
        boost::asio::post(e->stream->get_executor(), [e] {
            e->write();
            e->read();
        });
        return f;
    }
    void end(boost::system::error_code ec) {
        if (ended) return;
        ended = true;
        out.error = ec;
        out.failure = stream->failure();
        out.back.resize(got);
        result.set_value(std::move(out));
    }
    void write() {
        if (sent == data.size() || ended) return;
        const boost::asio::const_buffer b[] = {
            boost::asio::buffer(data.data() + sent, std::min(chunk, data.size() - sent))};
        stream->async_write_some(
            b, [self = shared_from_this()](boost::system::error_code ec, std::size_t n) {
                self->out.completions_on_io_thread &= io::on_io_thread();
                if (ec) return self->end(ec);
                self->sent += n;
                self->write();
            });
    }
    void read() {
        if (ended) return;
        stream->async_read_some(
            boost::asio::buffer(out.back.data() + got, out.back.size() - got),
            [self = shared_from_this()](boost::system::error_code ec, std::size_t n) {
                self->out.completions_on_io_thread &= io::on_io_thread();
                if (ec) return self->end(ec);
                self->got += n;
                if (self->got == self->out.back.size()) return self->end({});
                self->read();
            });
    }
};

}  // namespace

TEST_CASE("ssh core: many tunnels on one session move data at once beside exec", "[ssh][e2e]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(1);
    Session s(options_for(hosts, 0));
    NetnsEchoServer echo(hosts, 0, 7200);

    // Eight tunnels read and written by threads, eight by their own asynchronous operations.
    constexpr int kEach = 8;
    std::vector<std::vector<std::byte>> sent;
    for (int k = 0; k < 2 * kEach; ++k)
        sent.push_back(random_bytes((3u << 20) + 4096 * static_cast<std::size_t>(k),
                                    500 + static_cast<unsigned>(k)));
    std::vector<std::future<AsyncEcho::Outcome>> async;
    for (int k = 0; k < kEach; ++k) {
        async.push_back(AsyncEcho::start(s.open_tunnel("127.0.0.1", 7200), sent[kEach + k],
                                         7000 + 30011 * static_cast<std::size_t>(k)));
    }
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int k = 0; k < kEach; ++k) {
        threads.emplace_back([&, k] {
            try {
                auto t = blocking_transport(s.open_tunnel("127.0.0.1", 7200));
                auto back = echo_through(*t, sent[k], 65536 + 4099 * static_cast<std::size_t>(k));
                if (back != sent[k]) ++failures;
            } catch (const std::exception& e) {
                UNSCOPED_INFO("tunnel " << k << ": " << e.what());
                ++failures;
            }
        });
    }
    // Exec on the same session meanwhile: a blocking one with a line callback, and an
    // asynchronous one whose callbacks run on the session's strand.
    int lines = 0;
    bool in_order = true;
    ExecOptions eo;
    eo.on_stdout = [&](std::string_view l) {
        in_order &= l == std::to_string(lines + 1);
        ++lines;
    };
    std::promise<std::pair<std::exception_ptr, ExecResult>> done;
    std::atomic<int> async_lines{0};
    std::atomic<bool> callbacks_on_io{true};
    ExecOptions ao;
    ao.on_stdout = [&](std::string_view) {
        ++async_lines;
        callbacks_on_io = callbacks_on_io && io::on_io_thread();
    };
    s.async_exec("seq 1 30000; echo oops >&2; exit 3", ao, [&](std::exception_ptr e, ExecResult r) {
        done.set_value({e, std::move(r)});
    });
    auto r = s.exec("seq 1 30000", eo);
    CHECK(r.exit_status == 0);
    CHECK(lines == 30000);
    CHECK(in_order);
    auto [error, ar] = done.get_future().get();
    CHECK_FALSE(error);
    CHECK(ar.exit_status == 3);
    CHECK(ar.err == "oops\n");
    CHECK(async_lines == 30000);
    CHECK(callbacks_on_io);

    for (auto& t : threads) t.join();
    CHECK(failures == 0);
    for (int k = 0; k < kEach; ++k) {
        REQUIRE(async[static_cast<std::size_t>(k)].wait_for(std::chrono::seconds(60)) ==
                std::future_status::ready);
        auto o = async[static_cast<std::size_t>(k)].get();
        INFO("async tunnel " << k << ": " << o.error.message() << " " << o.failure);
        CHECK_FALSE(o.error);
        CHECK(o.back == sent[static_cast<std::size_t>(kEach + k)]);  // every byte, in order
        CHECK(o.completions_on_io_thread);
    }
}

TEST_CASE("ssh core: asynchronous connect, exec and tunnel open", "[ssh][e2e]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(1);
    std::promise<std::pair<std::exception_ptr, Session>> connected;
    Session::async_connect(options_for(hosts, 0), [&](std::exception_ptr e, Session s) {
        connected.set_value({e, std::move(s)});
    });
    auto [error, s] = connected.get_future().get();
    REQUIRE_FALSE(error);
    CHECK(s.host_key_fingerprint() == hosts.host_key_fingerprint(0));

    // A refused port: the error comes through the handler, typed.
    auto o = options_for(hosts, 0);
    o.port = 2222;
    o.connect_attempts = 1;
    std::promise<std::exception_ptr> refused;
    Session::async_connect(o, [&](std::exception_ptr e, Session) { refused.set_value(e); });
    auto e = refused.get_future().get();
    REQUIRE(e);
    CHECK_THROWS_AS(std::rethrow_exception(e), ConnectError);

    // An exec's timeout is a timer on the strand: the handler hears of it in bounded time.
    std::promise<std::exception_ptr> timed;
    ExecOptions quick;
    quick.timeout = milliseconds(300);
    auto t0 = Clock::now();
    s.async_exec("sleep 20", quick,
                 [&](std::exception_ptr ex, ExecResult) { timed.set_value(ex); });
    auto te = timed.get_future().get();
    CHECK(Clock::now() - t0 < std::chrono::seconds(5));
    REQUIRE(te);
    CHECK_THROWS_AS(std::rethrow_exception(te), sky::TimeoutError);

    start_echo_server(s, 7100);
    std::promise<std::pair<std::exception_ptr, std::unique_ptr<io::Stream>>> opened;
    s.async_open_tunnel("127.0.0.1", 7100, std::chrono::seconds(5),
                        [&](std::exception_ptr ex, std::unique_ptr<io::Stream> t) {
                            opened.set_value({ex, std::move(t)});
                        });
    auto [open_error, tunnel] = opened.get_future().get();
    REQUIRE_FALSE(open_error);
    auto data = random_bytes(1u << 20, 3);
    auto out = AsyncEcho::start(std::move(tunnel), data, 100000).get();
    CHECK_FALSE(out.error);
    CHECK(out.back == data);

    std::promise<std::exception_ptr> nobody;
    s.async_open_tunnel("127.0.0.1", 7199, std::chrono::seconds(5),
                        [&](std::exception_ptr ex, std::unique_ptr<io::Stream> t) {
                            nobody.set_value(t ? nullptr : ex);
                        });
    auto ne = nobody.get_future().get();
    REQUIRE(ne);
    CHECK_THROWS_AS(std::rethrow_exception(ne), ChannelError);
    CHECK(s.exec("echo fine").out == "fine\n");
}

namespace {

// A server on the node that accepts connections on 127.0.0.1:port and never reads: a tunnel to
// it fills its window and then holds its writes (and its reads) in flight.
const char* kSinkServer = R"PY(
import socket, sys, time
srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", int(sys.argv[1])))
srv.listen(64)
held = []
while True:
    c, _ = srv.accept()
    held.append(c)
)PY";

// Writes and reads a blocking transport on two threads until both end; the first error.
std::exception_ptr pump_until_error(sky::detail::Transport& t) {
    std::exception_ptr read_error, write_error;
    std::thread reader([&] {
        try {
            std::vector<std::byte> buf(64u << 10);
            while (t.read_some(buf) > 0) {
            }
        } catch (...) {
            read_error = std::current_exception();
        }
    });
    try {
        std::vector<std::byte> chunk(1u << 20, std::byte{7});
        std::span<const std::byte> bufs[] = {chunk};
        for (int i = 0; i < 256; ++i) t.write_all(bufs);
    } catch (...) {
        write_error = std::current_exception();
    }
    reader.join();
    return write_error ? write_error : read_error;
}

}  // namespace

TEST_CASE("ssh core: a session killed mid-transfer completes every operation with an error",
          "[ssh][e2e]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(1);
    Session s(options_for(hosts, 0));
    s.upload(std::string_view(kSinkServer), "sky_sink.py", 0644);
    REQUIRE(s.exec("nohup python3 sky_sink.py 7300 >/dev/null 2>&1 </dev/null &").exit_status == 0);
    std::unique_ptr<io::Stream> probe;
    for (int i = 0; i < 200 && !probe; ++i) {
        try {
            probe = s.open_tunnel("127.0.0.1", 7300, std::chrono::seconds(5));
        } catch (const ChannelError&) {
            std::this_thread::sleep_for(milliseconds(50));
        }
    }
    REQUIRE(probe);

    // In flight when sshd dies: tunnels whose writes wait for a window that never opens (by
    // their own asynchronous operations and through blocking transports), a tunnel's read, a
    // blocking and an asynchronous exec, an upload from a slow source.
    std::vector<std::future<AsyncEcho::Outcome>> async;
    for (int k = 0; k < 2; ++k)
        async.push_back(AsyncEcho::start(s.open_tunnel("127.0.0.1", 7300),
                                         random_bytes(64u << 20, 40 + static_cast<unsigned>(k)),
                                         1u << 20));
    std::vector<std::future<std::exception_ptr>> blocking;
    auto run = [&](std::function<void()> f) {
        blocking.push_back(std::async(std::launch::async, [f]() -> std::exception_ptr {
            try {
                f();
            } catch (...) {
                return std::current_exception();
            }
            return nullptr;
        }));
    };
    for (int k = 0; k < 2; ++k) {
        run([&s] {
            auto t = blocking_transport(s.open_tunnel("127.0.0.1", 7300));
            if (auto e = pump_until_error(*t)) std::rethrow_exception(e);
        });
    }
    run([&s] { s.exec("sleep 60"); });
    run([&s] {
        std::size_t calls = 0;
        s.upload(
            [&](std::byte* buf, std::size_t n) -> std::size_t {
                if (++calls > 2000) return 0;
                std::this_thread::sleep_for(milliseconds(20));
                const std::size_t k = std::min<std::size_t>(n, 64u << 10);
                std::memset(buf, 'u', k);
                return k;
            },
            "slow-upload.bin", 0644);
    });
    std::promise<std::exception_ptr> async_exec;
    s.async_exec("sleep 60", {},
                 [&](std::exception_ptr e, ExecResult) { async_exec.set_value(e); });
    std::promise<std::pair<boost::system::error_code, std::string>> read_end;
    std::byte one[1];
    boost::asio::post(probe->get_executor(), [&] {
        probe->async_read_some(boost::asio::buffer(one),
                               [&](boost::system::error_code ec, std::size_t) {
                                   read_end.set_value({ec, probe->failure()});
                               });
    });

    std::this_thread::sleep_for(milliseconds(1000));
    const auto t0 = Clock::now();
    hosts.kill_sshd(0);

    constexpr auto kBound = std::chrono::seconds(10);
    for (auto& f : blocking) {
        REQUIRE(f.wait_until(t0 + kBound) == std::future_status::ready);
        auto e = f.get();
        REQUIRE(e);
        CHECK_THROWS_AS(std::rethrow_exception(e), ConnectionLost);
    }
    auto ae = async_exec.get_future();
    REQUIRE(ae.wait_until(t0 + kBound) == std::future_status::ready);
    auto aex = ae.get();
    REQUIRE(aex);
    CHECK_THROWS_AS(std::rethrow_exception(aex), ConnectionLost);
    for (auto& f : async) {
        REQUIRE(f.wait_until(t0 + kBound) == std::future_status::ready);
        auto o = f.get();
        CHECK(o.error == make_error(StreamErrc::connection_lost));
        CHECK(o.back.size() < (64u << 20));
        CHECK_THAT(o.failure, Catch::Contains(hosts.address(0)));
    }
    auto re = read_end.get_future();
    REQUIRE(re.wait_until(t0 + kBound) == std::future_status::ready);
    auto [ec, why] = re.get();
    CHECK(ec == make_error(StreamErrc::connection_lost));
    CHECK_THAT(why, Catch::Contains("connection"));
    INFO("took " << std::chrono::duration<double>(Clock::now() - t0).count() << " s");
    CHECK(Clock::now() - t0 < kBound);

    // Later operations fail at once, typed.
    CHECK_FALSE(s.alive());
    CHECK_THROWS_AS(s.exec("true"), ConnectionLost);
    CHECK_THROWS_AS(s.open_tunnel("127.0.0.1", 7300), ConnectionLost);
}

TEST_CASE("ssh core: blocking calls on an I/O thread are refused, not deadlocked", "[ssh][e2e]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(1);
    Session s(options_for(hosts, 0));
    start_echo_server(s, 7100);
    auto t = blocking_transport(s.open_tunnel("127.0.0.1", 7100));
    std::promise<std::vector<std::string>> seen;
    boost::asio::post(io::executor(), [&] {
        std::vector<std::string> what;
        auto attempt = [&](const std::function<void()>& f) {
            try {
                f();
                what.emplace_back("no error");
            } catch (const std::logic_error& e) {
                what.emplace_back(e.what());
            } catch (const std::exception& e) {
                what.emplace_back(std::string("other error: ") + e.what());
            }
        };
        attempt([&] { s.exec("true"); });
        attempt([&] { s.upload(std::string_view("x"), "x.txt"); });
        attempt([&] { s.open_tunnel("127.0.0.1", 7100); });
        attempt([&] { Session(options_for(hosts, 0)); });
        attempt([&] {
            std::byte b[4];
            t->read_some(b);
        });
        seen.set_value(std::move(what));
    });
    auto what = seen.get_future().get();
    REQUIRE(what.size() == 5);
    for (const auto& w : what) CHECK_THAT(w, Catch::Contains("I/O core"));
    // Nothing was started, and the session goes on.
    CHECK(s.exec("echo on").out == "on\n");
    std::string ping = "ping";
    std::span<const std::byte> bufs[] = {std::as_bytes(std::span(ping))};
    t->write_all(bufs);
    std::byte back[4];
    std::size_t got = 0;
    while (got < 4) got += t->read_some(std::span(back).subspan(got));
    CHECK(std::memcmp(back, ping.data(), 4) == 0);
}

TEST_CASE("ssh core: 8 sessions with tunnels add no thread", "[ssh][e2e]") {
    SKIP_WITHOUT_HOSTS();
    constexpr int kHosts = 8;
    TestHosts hosts(kHosts);
    for (int i = 0; i < kHosts; ++i) {
        Session setup(options_for(hosts, i));
        start_echo_server(setup, 7100);
    }
    const int before = thread_count();  // the I/O core is up since the first session
    {
        std::vector<std::unique_ptr<Session>> sessions;
        std::vector<std::future<AsyncEcho::Outcome>> echoes;
        std::vector<std::vector<std::byte>> sent;
        for (int i = 0; i < kHosts; ++i) {
            sessions.push_back(std::make_unique<Session>(options_for(hosts, i)));
            for (int k = 0; k < 2; ++k) {
                sent.push_back(random_bytes(1u << 20, static_cast<unsigned>(10 * i + k)));
                echoes.push_back(AsyncEcho::start(sessions.back()->open_tunnel("127.0.0.1", 7100),
                                                  sent.back(), 50000));
            }
        }
        const int during = thread_count();
        for (std::size_t k = 0; k < echoes.size(); ++k) {
            auto o = echoes[k].get();
            CHECK_FALSE(o.error);
            CHECK(o.back == sent[k]);
        }
        for (auto& s : sessions) CHECK(s->exec("echo up").out == "up\n");
        const int after = thread_count();
        WARN("client threads: " << before << " before the 8 sessions, " << during
                                << " with 8 sessions and 16 tunnels moving data, " << after
                                << " after their execs");
        CHECK(during == before);
        CHECK(after == before);
    }
    CHECK(thread_count() == before);
}

// Not run by default: `sky_test_ssh "[.bench]"`. The blocking operations' own costs on one test
// host: an exec's round trip (median of 50) and SFTP upload throughput from a buffer and from a
// streamed source (best of 3, 64 MiB).
TEST_CASE("ssh: exec round trip and upload throughput", "[.bench]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(1);
    Session s(options_for(hosts, 0));
    std::vector<double> exec_ms;
    for (int i = 0; i < 50; ++i) {
        auto t0 = Clock::now();
        REQUIRE(s.exec("true").exit_status == 0);
        exec_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    std::sort(exec_ms.begin(), exec_ms.end());
    auto data = random_bytes(64u << 20, 11);
    double from_buffer = 0, streamed = 0;
    for (int rep = 0; rep < 3; ++rep) {
        auto t0 = Clock::now();
        s.upload(std::span<const std::byte>(data), "bench.bin", 0644);
        from_buffer =
            std::max(from_buffer, 64.0 / std::chrono::duration<double>(Clock::now() - t0).count());
        std::size_t off = 0;
        t0 = Clock::now();
        s.upload(
            [&](std::byte* b, std::size_t n) {
                const std::size_t k = std::min(n, data.size() - off);
                std::memcpy(b, data.data() + off, k);
                off += k;
                return k;
            },
            "bench.bin", 0644);
        streamed =
            std::max(streamed, 64.0 / std::chrono::duration<double>(Clock::now() - t0).count());
    }
    WARN("exec round trip, median: " << exec_ms[exec_ms.size() / 2]
                                     << " ms; upload: " << from_buffer << " MiB/s from a buffer, "
                                     << streamed << " MiB/s streamed");
}
