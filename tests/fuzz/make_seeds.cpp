// Writes the seed inputs of the frames and args targets with the library's own encoders (real
// frames, real argument encodings), into tests/fuzz/corpus/<target>/seed-*. Run once by hand or
// by scripts/fuzz.sh; the files are kept in the repository.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "metrics/metrics.hpp"
#include "runtime/protocol.hpp"
#include "sky/detail/serialize.hpp"

using namespace sky::detail;

namespace {

std::filesystem::path root;

void write(const std::string& target, const std::string& name, std::span<const std::byte> prefix,
           std::span<const std::byte> bytes) {
    const auto dir = root / target;
    std::filesystem::create_directories(dir);
    std::ofstream out(dir / ("seed-" + name), std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(prefix.data()),
              static_cast<std::streamsize>(prefix.size()));
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
}

template <class T>
Buffer encoded(const T& value) {
    Buffer b;
    save_to(b, value);
    return b;
}

// fuzz_frames: [read size and mode][frame limit] then the stream.
void frame_seed(const std::string& name, const Buffer& stream, std::uint8_t mode = 0x05,
                std::uint8_t limit = 0x01) {
    const std::byte head[2] = {std::byte{mode}, std::byte{limit}};
    write("frames", name, head, stream.span());
}

}  // namespace

int main(int argc, char** argv) {
    root = argc > 1 ? argv[1] : "tests/fuzz/corpus";
    // Frames: a hello each way, a call with and without a plugin block, a result, an error, a
    // log line, metrics, ready, layout, started, confirm, ack and the control frames, in one
    // stream and alone.
    ClientHello ch;
    ch.pool_id = "pool-1";
    ch.instance_id = "i-0abc";
    ch.accelerators = {"H100:8"};
    ch.accelerator = "H100:8";
    ch.session = "0123456789abcdef";
    WorkerHello wh;
    wh.build_id = "0123abcd";
    wh.hostname = "node-0";
    wh.functions = {{"stats::mean", 42}, {"train", 7}};
    ErrorMsg em{ErrorMsg::exception, "std::runtime_error", "boom", {"line 1", "line 2"}};
    sky::Metrics ms;
    ms.cpu_percent = 12.5;
    ms.gpu_utilization = 99;
    WorkerReady wr{2, "A100-80GB@3g.40gb:2", {29500, 29501}, {"0", "1"}};
    PoolLayout pl{{"10.0.0.1", "10.0.0.2"}, {1, 2}, {{29500}, {29500, 29501}}};

    Buffer call;
    append_call_header(call, "stats::mean", 0x1234);
    const Buffer args = encoded(std::vector<double>{1, 2, 3});
    call.append(args.data(), args.size());
    Buffer plugin_call;
    append_call_plugin(plugin_call, CallPlugin{1, "torch", 0});
    plugin_call.append(call.data(), call.size());

    Buffer all;
    append_frame(all, MsgType::hello, 0, encoded(ch).span());
    append_frame(all, MsgType::hello, 0, encoded(wh).span());
    append_frame(all, MsgType::ready, 0, encoded(wr).span());
    append_frame(all, MsgType::layout, 0, encoded(pl).span());
    append_frame(all, MsgType::call, 1, call.span());
    {
        const std::size_t at = all.size();
        append_frame(all, MsgType::call, 2, plugin_call.span());
        encode_header(all.data() + at, MsgType::call, 2, plugin_call.size(), call_flag_plugin);
    }
    append_log_frame(all, 1, 1, 1700000000.5, "hello from the worker");
    append_frame(all, MsgType::metrics, 0, encoded(ms).span());
    append_frame(all, MsgType::result, 1, encoded(2.0).span());
    append_frame(all, MsgType::result, 2, encoded(std::vector<std::string>{"a", "bc"}).span());
    append_frame(all, MsgType::error, 3, encoded(em).span());
    append_frame(all, MsgType::heartbeat, 0, {});
    append_frame(all, MsgType::cancel, 4, {});
    {
        const std::size_t at = all.size();
        append_frame(all, MsgType::call, 5, call.span());
        encode_header(all.data() + at, MsgType::call, 5, call.size(), call_flag_at_most_once);
    }
    append_frame(all, MsgType::started, 5, {});
    append_frame(all, MsgType::confirm, 5, {});
    const std::uint64_t acked[] = {1, 2, 3};
    append_ack_frame(all, acked);
    append_frame(all, MsgType::shutdown, 0, {});
    frame_seed("stream", all);
    frame_seed("stream-small-reads", all, 0x00);
    {
        Buffer b;
        append_frame(b, MsgType::hello, 0, encoded(ch).span());
        frame_seed("client-hello", b, 0x05, 0xa0);  // limit 1 MiB, as before the hello
    }
    {
        Buffer b;
        const std::size_t at = b.size();
        append_frame(b, MsgType::call, 9, plugin_call.span());
        encode_header(b.data() + at, MsgType::call, 9, plugin_call.size(), call_flag_plugin);
        frame_seed("plugin-call", b);
    }
    {
        // The worker's challenge and a (wrong) proof, for the client's handshake.
        Buffer b;
        const std::byte nonce[32] = {};
        append_frame(b, MsgType::auth, 0, nonce);
        append_frame(b, MsgType::auth, 0, nonce);
        frame_seed("auth", b, 0x45);
    }

    // Args: [function][flags and alignment] then the argument bytes of that function (the order
    // of fuzz_args.cpp's targets(): scalars, nested, record, sequences, hashed, flat).
    auto args_seed = [](const std::string& name, std::uint8_t pick, std::uint8_t flags,
                        const Buffer& b) {
        const std::byte head[2] = {std::byte{pick}, std::byte{flags}};
        write("args", name, head, b.span());
    };
    {
        Buffer b;
        save_to(b, std::string("mean of these"), std::vector<double>{1.5, -2, 1e300},
                std::int32_t{7});
        args_seed("scalars", 0, 0, b);
        args_seed("scalars-misaligned-plugin", 0, 0x07, b);
    }
    {
        Buffer b;
        save_to(b, std::vector<std::vector<double>>{{1, 2}, {}, {3}},
                std::vector<bool>{true, false, true}, std::optional<std::string>("label"));
        args_seed("nested", 1, 0, b);
    }
    {
        // Record: name, xs, tags, value (variant index 1: string), ids, weight, shape.
        Buffer b;
        save_to(b, std::string("r"), std::vector<float>{0.5f},
                std::map<std::string, std::vector<std::int64_t>>{{"k", {1, 2}}}, std::int32_t{1},
                std::string("v"), std::vector<int>{}, 0.0, std::uint8_t{3}, true, std::int16_t{1},
                std::int16_t{2}, std::int16_t{3});
        args_seed("record", 2, 0, b);
    }
    {
        Buffer b;
        save_to(b, std::vector<std::string>{"a", "b"}, std::vector<std::array<double, 8>>{{}});
        args_seed("sequences", 3, 0, b);
    }
    {
        Buffer b;
        save_to(b, std::map<std::string, int>{{"x", 1}, {"y", 2}});
        args_seed("hashed", 4, 0, b);
    }
    {
        Buffer b;
        save_to(b, std::vector<double>{1, 2}, std::vector<std::uint16_t>{1, 2, 3},
                std::vector<double>{4});
        args_seed("flat", 5, 0, b);
        args_seed("flat-misaligned", 5, 0x06, b);
    }
    {
        Buffer raw;  // a whole call payload, header included (function 0xff: raw)
        raw.append(call.data(), call.size());
        args_seed("raw-call", 0xff, 0, raw);
    }
    std::printf("seeds written under %s\n", root.c_str());
}
