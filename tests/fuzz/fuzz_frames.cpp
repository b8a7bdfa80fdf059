// Frames from a hostile peer: the reader over a byte stream cut into reads of any size, then
// every payload decoded as the message its type names (both directions), as the client's and the
// worker's readers do; first, sometimes, the client's side of the authentication handshake.
// Expected: sky::Error (ProtocolError) from the reader and the frame decoders, cereal::Exception
// from load_from (documented by serialize.hpp). A payload read must never allocate more than the
// stream holds (libFuzzer's -malloc_limit_mb catches that).
#include <algorithm>
#include <cereal/details/helpers.hpp>
#include <chrono>
#include <cstdint>
#include <span>
#include <vector>

#include "fuzz/fuzz_common.hpp"
#include "metrics/metrics.hpp"
#include "runtime/auth.hpp"
#include "runtime/protocol.hpp"
#include "sky/detail/call.hpp"
#include "sky/detail/serialize.hpp"

using namespace sky::detail;

namespace {

// The fuzz input as a peer's stream, delivered in reads of at most `chunk` bytes.
class InputTransport final : public Transport {
public:
    InputTransport(std::span<const std::byte> bytes, std::size_t chunk)
        : rest_(bytes), chunk_(chunk) {}
    std::size_t read_some(std::span<std::byte> buf) override {
        const std::size_t n = std::min({buf.size(), rest_.size(), chunk_});
        std::copy_n(rest_.begin(), n, buf.begin());
        rest_ = rest_.subspan(n);
        return n;
    }
    void write_all(std::span<const std::span<const std::byte>>) override {}
    void shutdown() noexcept override {}
    [[nodiscard]] std::string describe() const override { return "fuzz input"; }

private:
    std::span<const std::byte> rest_;
    std::size_t chunk_;
};

template <class T>
void decode_as(std::span<const std::byte> payload) {
    sky::fuzz::expect_typed<cereal::Exception>([&] {
        T value;
        load_from(payload, value);
    });
}

// A result payload as the client takes it: undecodable bytes are a ProtocolError.
template <class R>
void take_as(std::span<const std::byte> payload) {
    sky::fuzz::expect_typed([&] {
        Outcome o;
        o.result.append(payload.data(), payload.size());
        (void)take<R>(o);
    });
}

void decode_payload(Frame& f) {
    const auto p = f.payload;
    switch (f.header.type) {
        case MsgType::hello:
            decode_as<ClientHello>(p);
            decode_as<WorkerHello>(p);
            break;
        case MsgType::call:
            sky::fuzz::expect_typed([&] {
                CallPlugin plugin;
                CallHeader c = decode_call(decode_call_plugin(p, f.header.flags, plugin));
                sky::fuzz::check(c.args.data() >= p.data() &&
                                     c.args.data() + c.args.size() <= p.data() + p.size(),
                                 "call arguments outside the payload");
            });
            break;
        case MsgType::result:
            take_as<std::vector<double>>(p);
            take_as<std::string>(p);
            take_as<std::vector<std::string>>(p);
            break;
        case MsgType::error:
            decode_as<ErrorMsg>(p);
            break;
        case MsgType::log:
            sky::fuzz::expect_typed([&] { (void)decode_log(p); });
            break;
        case MsgType::metrics:
            decode_as<sky::Metrics>(p);
            break;
        case MsgType::ready:
            decode_as<WorkerReady>(p);
            break;
        case MsgType::layout:
            decode_as<PoolLayout>(p);
            break;
        case MsgType::ack:
            sky::fuzz::expect_typed([&] { (void)decode_ack(p); });
            break;
        default:
            break;
    }
    Buffer owned = f.take_payload();
    sky::fuzz::check(owned.size() == p.size(), "take_payload changed the payload's size");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 2) return 0;
    // Byte 0: read size and mode; byte 1: frame limit. The rest is the stream.
    const std::size_t chunk = 1 + (data[0] & 0x3f) * 37;
    const bool authenticate = data[0] & 0x40;
    const std::uint64_t max_frame =
        data[1] & 1 ? default_max_frame : std::uint64_t{1} << (data[1] >> 3);
    InputTransport t({reinterpret_cast<const std::byte*>(data + 2), size - 2}, chunk);
    std::unique_ptr<FrameReader> reader;
    if (authenticate) {
        reader = std::make_unique<FrameReader>(t, auth_max_frame);
        bool ok = false;
        sky::fuzz::expect_typed([&] {
            client_authenticate(t, *reader, "fuzz-token", std::chrono::milliseconds(100));
            ok = true;
        });
        // A MAC matching a token it does not know: only a forged HMAC gets here.
        sky::fuzz::check(!ok, "authentication passed without the token");
        return 0;
    }
    std::uint64_t limit = max_frame;
    reader = std::make_unique<FrameReader>(t, limit);
    Frame f;
    for (int i = 0; i < 256; ++i) {
        bool more = false;
        bool failed = true;
        sky::fuzz::expect_typed([&] {
            more = reader->next(f);
            failed = false;
        });
        if (failed || !more) break;
        sky::fuzz::check(f.payload.size() == f.header.length, "payload size differs from header");
        sky::fuzz::check(f.header.length <= limit, "frame over the limit accepted");
        decode_payload(f);
        // After the first frame the reader moves on with another limit, as the worker's does
        // after the hello.
        if (i == 0) {
            limit = default_max_frame;
            reader = std::make_unique<FrameReader>(std::move(*reader), limit);
        }
    }
    return 0;
}
