// io/sealed.hpp: the stream's cipher. What one end seals the other opens, whatever the reads'
// sizes; a record changed in any byte, replayed, reordered, dropped or cut off is refused with
// a ProtocolError (the worker's side) or ends the stream with bad_message (the pool's side);
// the bytes on the wire hold nothing of the plaintext.
#include <openssl/rand.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <boost/asio/buffer.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <future>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "io/blocking_stream.hpp"
#include "io/fd_stream.hpp"
#include "io/sealed.hpp"
#include "sky/errors.hpp"

namespace io = sky::detail::io;
using Bytes = std::vector<std::byte>;

namespace {

io::SealKey key_of(unsigned char seed) {
    io::SealKey k{};
    for (std::size_t i = 0; i < k.size(); ++i) k[i] = static_cast<std::byte>(seed + i * 7);
    return k;
}

Bytes text(const std::string& s) {
    Bytes b(s.size());
    std::memcpy(b.data(), s.data(), s.size());
    return b;
}

Bytes random_bytes(std::size_t n) {
    Bytes b(n);
    if (n)
        REQUIRE(RAND_bytes(reinterpret_cast<unsigned char*>(b.data()), static_cast<int>(n)) == 1);
    return b;
}

// Opens `wire` with a fresh opener for `key`, fed in pieces of `step` bytes.
Bytes open_all(const io::SealKey& key, const Bytes& wire, std::size_t step) {
    io::RecordOpener o(key);
    Bytes out;
    for (std::size_t at = 0; at < wire.size(); at += step) {
        o.feed({wire.data() + at, std::min(step, wire.size() - at)});
        o.open(out);
    }
    CHECK(o.partial() == 0);
    return out;
}

bool contains(const Bytes& hay, const Bytes& needle) {
    return std::search(hay.begin(), hay.end(), needle.begin(), needle.end()) != hay.end();
}

// A Transport over one end of a socket pair (the worker's FdTransport is the runtime's).
class SocketTransport final : public sky::detail::Transport {
public:
    explicit SocketTransport(int fd) : fd_(fd) {}
    ~SocketTransport() override { ::close(fd_); }
    std::size_t read_some(std::span<std::byte> buf) override {
        const ssize_t n = ::recv(fd_, buf.data(), buf.size(), 0);
        if (n < 0) throw sky::Error("recv failed");
        return static_cast<std::size_t>(n);
    }
    void write_all(std::span<const std::span<const std::byte>> bufs) override {
        for (auto b : bufs)
            while (!b.empty()) {
                const ssize_t n = ::send(fd_, b.data(), b.size(), MSG_NOSIGNAL);
                if (n <= 0) throw sky::Error("send failed");
                b = b.subspan(static_cast<std::size_t>(n));
            }
    }
    void shutdown() noexcept override { ::shutdown(fd_, SHUT_RDWR); }
    [[nodiscard]] std::string describe() const override { return "test socket"; }

private:
    int fd_;
};

}  // namespace

TEST_CASE("sealed records: the other end opens what one end seals, in any split", "[io][seal]") {
    const auto k = key_of(1);
    for (std::size_t size : {std::size_t{1}, std::size_t{100}, io::seal_max_record,
                             io::seal_max_record + 1, std::size_t{3} * io::seal_max_record + 17}) {
        const Bytes plain = random_bytes(size);
        io::RecordSealer s(k);
        Bytes wire;
        s.seal(plain, wire);
        const std::size_t records = (size + io::seal_max_record - 1) / io::seal_max_record;
        CHECK(wire.size() == size + records * io::seal_overhead);
        for (std::size_t step : {std::size_t{1}, std::size_t{7}, std::size_t{4096}, wire.size()}) {
            if (step == 1 && size > 1000) continue;  // byte by byte only for the small ones
            INFO("size " << size << ", fed " << step << " bytes at a time");
            CHECK(open_all(k, wire, step) == plain);
        }
    }
}

TEST_CASE("sealed records: the bytes on the wire hold nothing of the plaintext", "[io][seal]") {
    const Bytes secret = text("the pool token 0123456789abcdef and WANDB_API_KEY=hunter2");
    io::RecordSealer s(key_of(2));
    Bytes wire;
    for (int i = 0; i < 3; ++i) s.seal(secret, wire);
    CHECK_FALSE(contains(wire, text("token")));
    CHECK_FALSE(contains(wire, text("hunter2")));
    // The same plaintext twice is two different ciphertexts (a fresh nonce per record).
    const std::size_t rec = secret.size() + io::seal_overhead;
    CHECK_FALSE(std::equal(wire.begin() + 4, wire.begin() + static_cast<std::ptrdiff_t>(rec),
                           wire.begin() + static_cast<std::ptrdiff_t>(rec) + 4));
}

TEST_CASE(
    "sealed records: a changed byte, a replay, a reorder, a dropped record or the other key is "
    "a ProtocolError",
    "[io][seal]") {
    const auto k = key_of(3);
    io::RecordSealer s(k);
    Bytes a, b, c;
    s.seal(text("first record"), a);
    s.seal(text("second record"), b);
    s.seal(text("third"), c);
    auto cat = [](std::initializer_list<const Bytes*> parts) {
        Bytes out;
        for (auto* p : parts) out.insert(out.end(), p->begin(), p->end());
        return out;
    };
    auto refused = [&](const Bytes& wire, const io::SealKey& key) {
        io::RecordOpener o(key);
        o.feed(wire);
        Bytes out;
        try {
            o.open(out);
        } catch (const sky::ProtocolError& e) {
            INFO(e.what());
            return true;
        }
        // A length made larger waits for bytes that never come: at the end of the stream that
        // is a record cut off, which both transports refuse (tested below).
        return o.partial() > 0;
    };
    CHECK_FALSE(refused(cat({&a, &b, &c}), k));
    // Every byte of the first record, flipped: its length (the additional data), the
    // ciphertext and the tag are all covered.
    for (std::size_t i = 0; i < a.size(); ++i) {
        Bytes bad = cat({&a, &b});
        bad[i] ^= std::byte{0x01};
        INFO("byte " << i << " flipped");
        CHECK(refused(bad, k));
    }
    CHECK(refused(cat({&a, &a}), k));      // replayed
    CHECK(refused(cat({&b, &a}), k));      // reordered
    CHECK(refused(cat({&a, &c}), k));      // one dropped
    CHECK(refused(cat({&a}), key_of(4)));  // another key (the other direction's)
    // A length out of range is refused before anything is allocated for it.
    Bytes huge = a;
    huge[3] = std::byte{0x7f};
    CHECK(refused(huge, k));
}

TEST_CASE("sealed transport: round trip over a socket pair, a tampered record ends the stream",
          "[io][seal]") {
    int fds[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
    const io::SealKeys left{key_of(10), key_of(20)}, right{key_of(20), key_of(10)};
    io::SealedTransport a(std::make_unique<SocketTransport>(fds[0]), left);
    const int raw = fds[1];
    const Bytes plain = random_bytes(3u << 20);
    std::thread writer([&] {
        std::span<const std::byte> one[] = {plain};
        a.write_all(one);
    });
    // The far end reads the raw bytes and opens them itself: what crossed the socket is sealed.
    Bytes wire(plain.size() + 64 * io::seal_overhead);
    std::size_t have = 0;
    const std::size_t want = plain.size() + (plain.size() + io::seal_max_record - 1) /
                                                io::seal_max_record * io::seal_overhead;
    while (have < want) {
        const ssize_t n = ::recv(raw, wire.data() + have, want - have, 0);
        REQUIRE(n > 0);
        have += static_cast<std::size_t>(n);
    }
    writer.join();
    wire.resize(have);
    CHECK(open_all(right.open, wire, 65536) == plain);
    CHECK_FALSE(contains(wire, Bytes(plain.begin(), plain.begin() + 64)));

    // The far end answers: one good record, then one with a byte changed.
    io::RecordSealer back(right.seal);
    Bytes good, bad;
    back.seal(text("hello"), good);
    back.seal(text("changed"), bad);
    bad[bad.size() - 3] ^= std::byte{0x40};
    REQUIRE(::send(raw, good.data(), good.size(), 0) == static_cast<ssize_t>(good.size()));
    std::array<std::byte, 64> got{};
    REQUIRE(a.read_some(got) == 5);
    CHECK(std::memcmp(got.data(), "hello", 5) == 0);
    REQUIRE(::send(raw, bad.data(), bad.size(), 0) == static_cast<ssize_t>(bad.size()));
    CHECK_THROWS_AS(a.read_some(got), sky::ProtocolError);
    ::close(raw);
}

TEST_CASE(
    "sealed stream: clear until sealed, then sealed both ways, and a tampered record completes the "
    "read with bad_message",
    "[io][seal]") {
    int fds[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
    auto sealed =
        std::make_unique<io::SealedStream>(std::make_unique<io::FdStream>(fds[0], "pool end"));
    io::SealedStream* s = sealed.get();
    const io::SealKeys pool{key_of(30), key_of(40)}, worker{key_of(40), key_of(30)};
    // In clear first (the handshake): a write passes through unchanged.
    const std::string hello = "clear handshake bytes";
    {
        const std::array<boost::asio::const_buffer, 1> b{boost::asio::buffer(hello)};
        std::promise<std::size_t> done;
        s->async_write_some(
            b, [&](boost::system::error_code ec, std::size_t n) { done.set_value(ec ? 0 : n); });
        REQUIRE(done.get_future().get() == hello.size());
        std::string got(hello.size(), '\0');
        REQUIRE(::recv(fds[1], got.data(), got.size(), MSG_WAITALL) ==
                static_cast<ssize_t>(got.size()));
        CHECK(got == hello);
    }
    // The far end's first sealed record was read with the handshake's last clear bytes.
    io::RecordSealer far(worker.seal);
    Bytes early;
    far.seal(text("early"), early);
    s->seal(pool, early);
    io::BlockingStream b(std::move(sealed));
    std::array<std::byte, 64> got{};
    REQUIRE(b.read_some(got) == 5);
    CHECK(std::memcmp(got.data(), "early", 5) == 0);
    // Sealed writes: the far end opens them.
    const Bytes plain = random_bytes(1u << 20);
    std::thread writer([&] {
        std::span<const std::byte> one[] = {plain};
        b.write_all(one);
    });
    const std::size_t want = plain.size() + 4 * io::seal_overhead;
    Bytes wire(want);
    REQUIRE(::recv(fds[1], wire.data(), want, MSG_WAITALL) == static_cast<ssize_t>(want));
    writer.join();
    CHECK(open_all(worker.open, wire, 100000) == plain);
    // Then a record with a changed byte: the read fails, and the stream says why.
    Bytes bad;
    far.seal(text("tampered"), bad);
    bad[6] ^= std::byte{0x01};
    REQUIRE(::send(fds[1], bad.data(), bad.size(), 0) == static_cast<ssize_t>(bad.size()));
    std::string failure;
    try {
        (void)b.read_some(got);
    } catch (const std::exception& e) {
        failure = e.what();
    }
    INFO(failure);
    CHECK(failure.find("failed authentication") != std::string::npos);
    ::close(fds[1]);
}
