// Frames: round trips, and every kind of bad input gives a ProtocolError, never a crash.
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <exception>
#include <fstream>
#include <random>
#include <string>
#include <thread>

#include "runtime/fd_transport.hpp"
#include "runtime/protocol.hpp"
#include "sky/errors.hpp"

using namespace sky::detail;

namespace {
// A socketpair: bytes written to `in` come out of the reader's transport.
struct Pipe {
    int fds[2];
    std::unique_ptr<FdTransport> reader_side;
    Pipe() {
        REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
        reader_side = std::make_unique<FdTransport>(fds[0], "test");
    }
    ~Pipe() {
        if (fds[1] >= 0) ::close(fds[1]);
    }
    void write(const Buffer& b) {
        REQUIRE(::write(fds[1], b.data(), b.size()) == (ssize_t)b.size());
    }
    void end() {
        ::close(fds[1]);
        fds[1] = -1;
    }
};
std::span<const std::byte> bytes(const std::string& s) {
    return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}
}  // namespace

TEST_CASE("frames round trip, many per read", "[frames]") {
    Pipe p;
    Buffer b;
    for (int i = 0; i < 100; ++i) append_frame(b, MsgType::result, i + 1, bytes(std::to_string(i)));
    append_log_frame(b, 7, 2, 1.5, "a line");
    p.write(b);
    p.end();
    FrameReader r(*p.reader_side);
    Frame f;
    for (int i = 0; i < 100; ++i) {
        REQUIRE(r.next(f));
        CHECK(f.header.type == MsgType::result);
        CHECK(f.header.call_id == static_cast<std::uint64_t>(i + 1));
        CHECK(std::string(reinterpret_cast<const char*>(f.payload.data()), f.payload.size()) ==
              std::to_string(i));
    }
    REQUIRE(r.next(f));
    auto m = decode_log(f.payload);
    CHECK(m.line == "a line");
    CHECK(m.stream == 2);
    CHECK(m.timestamp == 1.5);
    CHECK_FALSE(r.next(f));  // clean end between frames
}

TEST_CASE("a large frame is read into a buffer of its own", "[frames]") {
    Pipe p;
    std::string big(16 << 20, 'x');
    big[12345] = 'y';
    Buffer b;
    append_frame(b, MsgType::call, 9, bytes(big));
    // The writer thread only writes: Catch2's assertions are not thread-safe, so what it did is
    // checked here after the join. A failed read shuts the reader down so that the writer's
    // send fails instead of blocking on a full socket, and the thread is always joined.
    std::size_t wrote = 0;
    std::thread w([&] {
        while (wrote < b.size()) {
            ssize_t k = ::send(p.fds[1], b.data() + wrote, b.size() - wrote, MSG_NOSIGNAL);
            if (k <= 0) break;
            wrote += static_cast<std::size_t>(k);
        }
        p.end();
    });
    FrameReader r(*p.reader_side);
    Frame f;
    bool got = false;
    std::exception_ptr read_error;
    try {
        got = r.next(f);
    } catch (...) {
        read_error = std::current_exception();
    }
    if (!got) p.reader_side->shutdown();
    w.join();
    if (read_error) std::rethrow_exception(read_error);
    REQUIRE(got);
    CHECK(wrote == b.size());
    CHECK(f.payload.size() == big.size());
    CHECK(static_cast<char>(f.payload[12345]) == 'y');
    Buffer taken = f.take_payload();
    CHECK(taken.size() == big.size());
}

TEST_CASE("truncated input is a ProtocolError naming what was cut", "[frames]") {
    SECTION("inside the header") {
        Pipe p;
        Buffer b;
        append_frame(b, MsgType::result, 1, bytes("hello"));
        Buffer cut;
        cut.append(b.data(), 10);
        p.write(cut);
        p.end();
        FrameReader r(*p.reader_side);
        Frame f;
        REQUIRE_THROWS_WITH(r.next(f), Catch::Contains("inside a frame header"));
    }
    SECTION("inside the payload") {
        Pipe p;
        Buffer b;
        append_frame(b, MsgType::result, 1, bytes("hello world"));
        Buffer cut;
        cut.append(b.data(), b.size() - 3);
        p.write(cut);
        p.end();
        FrameReader r(*p.reader_side);
        Frame f;
        REQUIRE_THROWS_AS(r.next(f), sky::ProtocolError);
    }
}

TEST_CASE("oversized, bad magic, bad version and unknown types are refused", "[frames]") {
    auto refuse = [](Buffer b, const char* what, std::uint64_t max = default_max_frame) {
        Pipe p;
        p.write(b);
        p.end();
        FrameReader r(*p.reader_side, max);
        Frame f;
        REQUIRE_THROWS_WITH(r.next(f), Catch::Contains(what));
    };
    Buffer ok;
    append_frame(ok, MsgType::result, 1, bytes("12345678"));
    {
        Buffer b;
        b.append(ok.data(), ok.size());
        refuse(std::move(b), "over the limit", 4);
    }
    {
        Buffer b;
        b.append(ok.data(), ok.size());
        b.data()[0] = std::byte{0x00};
        refuse(std::move(b), "bad frame magic");
    }
    {
        Buffer b;
        b.append(ok.data(), ok.size());
        b.data()[4] = std::byte{99};
        refuse(std::move(b), "protocol version");
    }
    {
        Buffer b;
        b.append(ok.data(), ok.size());
        b.data()[5] = std::byte{200};
        refuse(std::move(b), "unknown frame type");
    }
}

TEST_CASE("random garbage never crashes the reader", "[frames]") {
    std::mt19937 rng(1234);
    for (int round = 0; round < 200; ++round) {
        Pipe p;
        Buffer b;
        if (round % 2) append_frame(b, MsgType::log, 1, bytes("ok"));  // sometimes a good prefix
        std::size_t n = rng() % 200;
        for (std::size_t i = 0; i < n; ++i) b.push_back(static_cast<std::byte>(rng() & 0xff));
        p.write(b);
        p.end();
        FrameReader r(*p.reader_side, 1 << 20);
        Frame f;
        try {
            for (int k = 0; k < 10 && r.next(f); ++k) {
            }
        } catch (const sky::ProtocolError&) {
        }
    }
    SUCCEED("200 garbage streams read without a crash");
}

TEST_CASE("call and log payloads decode and reject short input", "[frames]") {
    Buffer b;
    append_call_header(b, "ns::f", 42);
    b.append("ARGS", 4);
    auto c = decode_call(b.span());
    CHECK(c.function == "ns::f");
    CHECK(c.signature == 42);
    CHECK(c.args.size() == 4);
    CHECK_THROWS_AS(decode_call(b.span().subspan(0, 5)), sky::ProtocolError);
    Buffer tiny;
    tiny.append("abc", 3);
    CHECK_THROWS_AS(decode_log(tiny.span()), sky::ProtocolError);
}

namespace {
// The "Build ID:" that binutils' readelf, another process reading the file on disk, finds in
// `path`; empty when it has none. Sets *ran to false when readelf could not be run.
std::string readelf_build_id(const std::string& path, bool* ran) {
    std::string cmd = "readelf -n '" + path + "' 2>/dev/null";
    FILE* p = ::popen(cmd.c_str(), "r");
    *ran = p != nullptr;
    if (!p) return {};
    std::string out;
    char buf[4096];
    while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
    *ran = ::pclose(p) == 0;
    auto at = out.find("Build ID: ");
    if (at == std::string::npos) return {};
    auto start = at + 10;
    return out.substr(start, out.find_first_of(" \n", start) - start);
}

std::string loaded_libc_path() {
    std::ifstream maps("/proc/self/maps");
    for (std::string line; std::getline(maps, line);)
        if (auto at = line.find('/');
            at != std::string::npos && line.find("/libc.so.6", at) != std::string::npos)
            return line.substr(at);
    return {};
}
}  // namespace

TEST_CASE("the build id is this executable's own GNU build id, not a library's", "[frames]") {
    char buf[4096];
    auto n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
    REQUIRE(n > 0);
    const std::string exe(buf, static_cast<std::size_t>(n));
    bool ran = false;
    const std::string expected = readelf_build_id(exe, &ran);
    if (!ran) {
        WARN("skipped: readelf (binutils) cannot be run here");
        return;
    }
    if (expected.empty()) {
        // Linked without a build-id note: the id is a hash of the file's bytes.
        CHECK(self_build_id().rfind("fnv-", 0) == 0);
        CHECK(self_build_id().size() == 4 + 16);
    } else {
        CHECK(self_build_id() == expected);
    }
    // The worker compares ids to refuse a different build; libc's id would make every program
    // look the same.
    const std::string libc = loaded_libc_path();
    REQUIRE_FALSE(libc.empty());
    const std::string libc_id = readelf_build_id(libc, &ran);
    CHECK(ran);
    CHECK_FALSE(libc_id.empty());
    CHECK(self_build_id() != libc_id);
}
