// The client's end of the wire (runtime/client_channel.hpp) against a scripted worker over a
// socketpair: the worker side authenticates with the real code, then writes exactly the frames a
// test gives it, so every rule of the handshake and of decoding is checked on its own.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "metrics/metrics.hpp"
#include "runtime/auth.hpp"
#include "runtime/client_channel.hpp"
#include "runtime/fd_transport.hpp"
#include "runtime/protocol.hpp"
#include "sky/detail/serialize.hpp"
#include "sky/errors.hpp"

using namespace sky::detail;
using namespace std::chrono_literals;

namespace {

const std::string token = "a token of thirty-two characters!";

/// The worker's end: what a test's script writes and reads after authentication.
struct WorkerEnd {
    FdTransport& t;
    FrameReader frames{t, 1 << 20};

    template <class T>
    void send(MsgType type, const T& value, std::uint64_t call_id = 0) {
        Buffer p;
        save_to(p, value);
        send_raw(type, p.span(), call_id);
    }
    void send_raw(MsgType type, std::span<const std::byte> payload, std::uint64_t call_id = 0) {
        Buffer out;
        append_frame(out, type, call_id, payload);
        std::span<const std::byte> one[] = {out.span()};
        t.write_all(one);
    }
    void hello(std::uint32_t protocol = protocol_version,
               const std::string& build = self_build_id()) {
        WorkerHello wh;
        wh.protocol = protocol;
        wh.build_id = build;
        send(MsgType::hello, wh);
    }
    /// Sends a good hello and waits for the client's; false when the client ended first.
    bool greet() {
        hello();
        Frame f;
        return frames.next(f) && f.header.type == MsgType::hello;
    }
    void ready(std::int32_t workers, std::vector<std::int32_t> ports) {
        WorkerReady r;
        r.workers = workers;
        r.ports = std::move(ports);
        send(MsgType::ready, r);
    }
    void log(std::uint64_t call_id, std::string_view line) {
        Buffer out;
        append_log_frame(out, call_id, 1, 12.5, line);
        std::span<const std::byte> one[] = {out.span()};
        t.write_all(one);
    }
    /// Reads until the client's end closes (bounded by the client, which always shuts down).
    void drain() {
        Frame f;
        try {
            while (frames.next(f)) {
            }
        } catch (const std::exception&) {
        }
    }
};

/// A worker on a thread of its own: it authenticates, then runs `script`. Joined on destruction
/// after the client's end is shut down, so a test never leaves it blocked.
class ScriptedWorker {
public:
    explicit ScriptedWorker(std::function<void(WorkerEnd&)> script) {
        int sv[2];
        REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
        client = std::make_unique<ClientChannel>(std::make_unique<FdTransport>(sv[0], "client end"),
                                                 "node 0 (test)");
        thread_ = std::thread([this, fd = sv[1], script = std::move(script)] {
            const int authed =
                worker_authenticate(-1, fd, token, std::chrono::steady_clock::now() + 10s, 10s,
                                    [](const std::string&) {});
            if (authed < 0) return;
            FdTransport t(authed, "worker end");
            WorkerEnd w{t};
            try {
                script(w);
            } catch (const std::exception& e) {
                worker_error = e.what();  // read after the join
            }
        });
    }
    ~ScriptedWorker() { join(); }
    /// Ends the client's end and waits for the script: what it recorded may be read after this.
    void join() {
        client->shutdown();
        if (thread_.joinable()) thread_.join();
    }
    ScriptedWorker(const ScriptedWorker&) = delete;
    ScriptedWorker& operator=(const ScriptedWorker&) = delete;

    std::unique_ptr<ClientChannel> client;
    std::string worker_error;

private:
    std::thread thread_;
};

ClientChannel::Handshake handshake_with(std::chrono::seconds hello, std::chrono::seconds ready) {
    ClientChannel::Handshake h;
    h.token = token;
    h.hello.pool_id = "pool-7";
    h.hello.node = 3;
    h.hello_bound = hello;
    h.ready_bound = ready;
    return h;
}

/// What `f` threw as an `E` (its what()), or a note that it threw something else or nothing.
template <class E, class F>
std::string thrown(F&& f) {
    try {
        f();
    } catch (const E& e) {
        return e.what();
    } catch (const std::exception& e) {
        return std::string("(another exception) ") + e.what();
    }
    return "(nothing thrown)";
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST_CASE("client channel: the handshake checks the hello, sends the client's, returns ready",
          "[client_channel]") {
    ClientHello seen;
    bool got_hello = false;
    ScriptedWorker w([&](WorkerEnd& e) {
        e.hello();
        Frame f;
        if (!e.frames.next(f) || f.header.type != MsgType::hello) return;
        load_from(f.payload, seen);
        got_hello = true;
        e.log(0, "installing what the job needs");  // before ready: reaches on_log
        e.send_raw(MsgType::heartbeat, {});
        e.ready(2, {5000, 5001});
        // Serving: one frame of each kind a worker sends.
        Buffer result;
        result.append("42", 2);
        e.send_raw(MsgType::result, result.span(), 7);
        ErrorMsg err;
        err.type_name = "std::runtime_error";
        err.message = "boom";
        e.send(MsgType::error, err, 8);
        e.log(8, "last words");
        sky::Metrics m;
        m.cpu_percent = 37.5;
        m.gpu_temperature = 61;
        e.send(MsgType::metrics, m);
        e.send_raw(MsgType::heartbeat, {});
        // Then the worker ends the stream: next() returns false.
    });
    auto h = handshake_with(5s, 5s);
    std::vector<std::string> logs;
    h.on_log = [&](LogMsg m) { logs.push_back(m.line); };
    const WorkerReady ready = w.client->handshake(h);
    CHECK(ready.workers == 2);
    CHECK(ready.ports == std::vector<std::int32_t>{5000, 5001});
    CHECK(logs == std::vector<std::string>{"installing what the job needs"});

    std::vector<Incoming> got;
    for (Incoming in; got.size() < 10 && w.client->next(in);) got.push_back(std::move(in));
    REQUIRE(got.size() == 5);
    CHECK(got[0].type == MsgType::result);
    CHECK(got[0].call_id == 7);
    CHECK(std::string(reinterpret_cast<const char*>(got[0].payload.data()),
                      got[0].payload.size()) == "42");
    CHECK(got[1].type == MsgType::error);
    CHECK(got[1].call_id == 8);
    CHECK(got[1].error.message == "boom");
    CHECK(got[1].error.type_name == "std::runtime_error");
    CHECK(got[2].type == MsgType::log);
    CHECK(got[2].call_id == 8);
    CHECK(got[2].log.line == "last words");
    CHECK(got[2].log.timestamp == 12.5);
    CHECK(got[3].type == MsgType::metrics);
    CHECK(got[3].metrics.cpu_percent == 37.5);
    CHECK(got[3].metrics.gpu_temperature == 61);
    CHECK(got[4].type == MsgType::heartbeat);
    Incoming end;
    CHECK_FALSE(w.client->next(end));

    w.join();
    // The worker got the client's hello as the pool wrote it.
    CHECK(got_hello);
    CHECK(seen.pool_id == "pool-7");
    CHECK(seen.node == 3);
}

TEST_CASE("client channel: a worker of another build or protocol is a ProtocolError naming it",
          "[client_channel]") {
    SECTION("another build of the program") {
        ScriptedWorker w([](WorkerEnd& e) {
            e.hello(protocol_version, "0123456789abcdef");
            e.drain();
        });
        const std::string m =
            thrown<sky::ProtocolError>([&] { w.client->handshake(handshake_with(5s, 5s)); });
        CHECK_THAT(m, Catch::Contains("node 0 (test)"));
        CHECK_THAT(m, Catch::Contains("different build"));
        CHECK_THAT(m, Catch::Contains("0123456789abcdef"));
        CHECK(m.rfind("node 0 (test): ", 0) == 0);
    }
    SECTION("another protocol") {
        ScriptedWorker w([](WorkerEnd& e) {
            e.hello(99);
            e.drain();
        });
        const std::string m =
            thrown<sky::ProtocolError>([&] { w.client->handshake(handshake_with(5s, 5s)); });
        CHECK_THAT(m, Catch::Contains("protocol 99"));
    }
}

TEST_CASE("client channel: a silent worker fails the handshake at its hello bound",
          "[client_channel]") {
    // Authenticated, then nothing: the hello bound ends the wait, not the worker.
    ScriptedWorker w([](WorkerEnd& e) { e.drain(); });
    const auto t0 = std::chrono::steady_clock::now();
    try {
        w.client->handshake(handshake_with(1s, 5s));
        FAIL("a silent worker passed the handshake");
    } catch (const sky::ProtocolError& e) {
        FAIL(std::string("a silence is not a protocol error: ") + e.what());
    } catch (const sky::Error& e) {
        CHECK_THAT(e.what(), Catch::Contains("no hello from the worker within 1 s"));
    }
    CHECK(seconds_since(t0) < 4.0);
}

TEST_CASE("client channel: a worker that chatters and never says ready is given up at the bound",
          "[client_channel]") {
    // Heartbeats and log lines every 100 ms, for at most 20 s: each frame arrives well within
    // any per-frame wait, so only a bound on the whole wait ends it.
    ScriptedWorker w([](WorkerEnd& e) {
        if (!e.greet()) return;
        for (int i = 0; i < 200; ++i) {
            if (i % 2)
                e.send_raw(MsgType::heartbeat, {});
            else
                e.log(0, "still starting");
            std::this_thread::sleep_for(100ms);
        }
    });
    const auto t0 = std::chrono::steady_clock::now();
    int lines = 0;
    auto h = handshake_with(5s, 1s);
    h.on_log = [&](LogMsg) { ++lines; };
    try {
        w.client->handshake(h);
        FAIL("the handshake returned without a ready frame");
    } catch (const sky::ProtocolError& e) {
        FAIL(std::string("waiting too long is not a protocol error: ") + e.what());
    } catch (const sky::Error& e) {
        CHECK_THAT(e.what(), Catch::Contains("the worker was not ready within 1 s"));
    }
    const double took = seconds_since(t0);
    CHECK(took >= 0.9);
    CHECK(took < 4.0);
    CHECK(lines >= 2);
}

TEST_CASE("client channel: a ready frame that contradicts itself is a ProtocolError",
          "[client_channel]") {
    ScriptedWorker w([](WorkerEnd& e) {
        if (!e.greet()) return;
        e.ready(3, {5000});  // three worker processes, one port
        e.drain();
    });
    const std::string m =
        thrown<sky::ProtocolError>([&] { w.client->handshake(handshake_with(5s, 5s)); });
    CHECK_THAT(m, Catch::Contains("3 worker processes and 1 ports"));
}

TEST_CASE("client channel: a frame a worker never sends is a ProtocolError, not a result",
          "[client_channel]") {
    SECTION("before ready") {
        ScriptedWorker w([](WorkerEnd& e) {
            if (!e.greet()) return;
            e.send_raw(MsgType::result, {}, 1);
            e.drain();
        });
        const std::string m =
            thrown<sky::ProtocolError>([&] { w.client->handshake(handshake_with(5s, 5s)); });
        CHECK_THAT(m, Catch::Contains("a result frame before the worker's ready frame"));
    }
    SECTION("while serving") {
        ScriptedWorker w([](WorkerEnd& e) {
            if (!e.greet()) return;
            e.ready(1, {0});
            e.send_raw(MsgType::call, {}, 1);
            Buffer junk;
            junk.append("\x01\x02", 2);
            e.send_raw(MsgType::error, junk.span(), 2);  // an error frame that does not decode
            e.drain();
        });
        w.client->handshake(handshake_with(5s, 5s));
        Incoming in;
        const std::string m = thrown<sky::ProtocolError>([&] { w.client->next(in); });
        CHECK_THAT(m, Catch::Contains("unexpected call frame"));
        CHECK_THROWS_AS(w.client->next(in), sky::ProtocolError);
    }
}

TEST_CASE(
    "client channel: a call's frame decodes to what was encoded, large arguments by reference",
    "[client_channel]") {
    for (const std::size_t size : {std::size_t{100}, std::size_t{1} << 20}) {
        auto args = std::make_shared<Buffer>();
        args->resize(size);
        for (std::size_t i = 0; i < size; ++i) args->data()[i] = std::byte(i * 7 % 251);
        CallDesc c;
        c.function = "train";
        c.signature = 0x1234;
        c.args = args;
        Outgoing out;
        encode_call(out, 41, c, -1);
        // Only a large argument buffer is referenced (a broadcast sends it from one buffer).
        CHECK(out.big.size() == (size > (64u << 10) ? 1u : 0u));

        std::string function;
        std::uint64_t signature = 0, call_id = 0;
        std::vector<std::byte> received;
        ScriptedWorker w([&](WorkerEnd& e) {
            if (!e.greet()) return;
            e.ready(1, {0});
            FrameReader big(std::move(e.frames), 8u << 20);
            Frame f;
            if (!big.next(f) || f.header.type != MsgType::call) return;
            call_id = f.header.call_id;
            const auto h = decode_call(f.payload);
            function = std::string(h.function);
            signature = h.signature;
            received.assign(h.args.begin(), h.args.end());
        });
        w.client->handshake(handshake_with(5s, 5s));
        w.client->write(out);
        Incoming in;
        CHECK_FALSE(w.client->next(in));  // the worker ends after the call
        w.join();
        CHECK(w.worker_error.empty());
        CHECK(call_id == 41);
        CHECK(function == "train");
        CHECK(signature == 0x1234);
        REQUIRE(received.size() == size);
        CHECK(std::equal(received.begin(), received.end(), args->data()));
    }
}
