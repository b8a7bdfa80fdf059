#include "runtime/client_channel.hpp"

#include <fmt/format.h>

#include "runtime/auth.hpp"
#include "sky/detail/serialize.hpp"

namespace sky::detail {

namespace {
// A call's arguments above this size are written from their own buffer, not copied.
constexpr std::size_t copy_limit = 64u << 10;
// The hello, once the worker is authenticated, is decoded with a bounded archive.
constexpr std::uint64_t hello_max_frame = 1 << 20;
}  // namespace

void encode_call(Outgoing& out, std::uint64_t call_id, const CallDesc& c, int worker) {
    const std::size_t args = c.args ? c.args->size() : 0;
    // A distributed call carries its plugin and the worker process (local rank) it is for.
    Buffer plugin;
    if (c.options.plugin.kind != PluginSpec::none)
        append_call_plugin(plugin, {c.options.plugin.kind, c.options.plugin.backend, worker});
    const std::size_t len = plugin.size() + call_header_size(c.function.size()) + args;
    const std::size_t at = out.small.size();
    out.small.resize(at + frame_header_size);
    std::uint16_t flags = plugin.empty() ? std::uint16_t{0} : call_flag_plugin;
    if (c.options.at_most_once) flags |= call_flag_at_most_once;
    encode_header(out.small.data() + at, MsgType::call, call_id, len, flags);
    if (!plugin.empty()) out.small.append(plugin.data(), plugin.size());
    append_call_header(out.small, c.function, c.signature);
    if (args > copy_limit)
        out.big.emplace_back(out.small.size(), c.args);
    else if (args)
        out.small.append(c.args->data(), args);
}

ClientChannel::ClientChannel(std::unique_ptr<Transport> transport, std::string name)
    : transport_(std::move(transport)), name_(std::move(name)) {}

WorkerReady ClientChannel::handshake(const Handshake& h) {
    auto& t = *transport_;
    // Until the worker has proven it holds the token, frames are limited to the fixed size of
    // the auth frames, and nothing it sends is decoded.
    auto reader = std::make_unique<FrameReader>(t, auth_max_frame);
    try {
        client_authenticate(t, *reader, h.token, h.hello_bound);
    } catch (const ProtocolError& e) {
        throw ProtocolError(fmt::format("{}: {}", name_, e.what()));
    } catch (const std::exception& e) {
        throw Error(fmt::format("{}: {}", name_, e.what()));
    }
    reader = std::make_unique<FrameReader>(std::move(*reader), hello_max_frame);
    // The hello usually came in the same read as the proof: wait only when it is not here.
    if (!reader->has_buffered_frame() && !t.wait_readable(h.hello_bound))
        throw Error(
            fmt::format("{}: no hello from the worker within {} s", name_, h.hello_bound.count()));
    Frame f;
    bool got = false;
    try {
        got = reader->next(f);
    } catch (const std::exception& e) {
        throw ProtocolError(fmt::format("{}: bad hello from the worker: {}", name_, e.what()));
    }
    if (!got || f.header.type != MsgType::hello)
        throw Error(fmt::format("{}: the worker closed the connection before its hello", name_));
    WorkerHello wh;
    try {
        load_from(f.payload, wh);
    } catch (const std::exception& e) {
        throw ProtocolError(fmt::format("{}: unreadable worker hello: {}", name_, e.what()));
    }
    if (wh.protocol != protocol_version)
        throw ProtocolError(fmt::format("{}: worker speaks protocol {}, this client {}", name_,
                                        wh.protocol, protocol_version));
    if (wh.build_id != self_build_id())
        throw ProtocolError(fmt::format(
            "{}: the worker runs a different build of the program (build id {}, this client {})",
            name_, wh.build_id, self_build_id()));
    Buffer payload;
    save_to(payload, h.hello);
    write_frame(MsgType::hello, payload.span());
    // The worker answers once its worker processes run (one per GPU or MIG slice): how many,
    // and a free port for each.
    // One bound for the whole wait: a worker that keeps sending logs or heartbeats and never
    // its ready frame is not waited for forever.
    WorkerReady ready;
    const auto ready_by = std::chrono::steady_clock::now() + h.ready_bound;
    for (bool have_ready = false; !have_ready;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            ready_by - std::chrono::steady_clock::now());
        if (!reader->has_buffered_frame() && (left.count() <= 0 || !t.wait_readable(left)))
            throw Error(fmt::format("{}: the worker was not ready within {} s", name_,
                                    h.ready_bound.count()));
        try {
            if (!reader->next(f))
                throw ProtocolError("the worker closed the connection before it was ready");
            if (f.header.type == MsgType::ready) {
                load_from(f.payload, ready);
                have_ready = true;
            } else if (f.header.type == MsgType::log) {
                auto m = decode_log(f.payload);
                if (h.on_log) h.on_log(std::move(m));
            } else if (f.header.type != MsgType::heartbeat) {
                throw ProtocolError(fmt::format("a {} frame before the worker's ready frame",
                                                msg_type_name(f.header.type)));
            }
        } catch (const std::exception& e) {
            throw ProtocolError(fmt::format("{}: {}", name_, e.what()));
        }
    }
    if (ready.workers < 1 || ready.workers > 1024 ||
        ready.ports.size() != static_cast<std::size_t>(ready.workers))
        throw ProtocolError(
            fmt::format("{}: the worker's ready frame names {} worker processes and {} ports",
                        name_, ready.workers, ready.ports.size()));
    // The reader goes on with whatever this one has buffered.
    frames_ = std::make_unique<FrameReader>(std::move(*reader), h.max_frame);
    return ready;
}

bool ClientChannel::next_frame(Frame& f) { return frames_ && frames_->next(f); }

bool ClientChannel::next(Incoming& in) {
    Frame& f = frame_;
    if (!next_frame(f)) return false;
    in.type = f.header.type;
    in.call_id = f.header.call_id;
    switch (f.header.type) {
        case MsgType::result:
            in.payload = f.take_payload();
            break;
        case MsgType::error:
            try {
                in.error = {};
                load_from(f.payload, in.error);
            } catch (const std::exception& x) {
                throw ProtocolError(fmt::format("unreadable error frame: {}", x.what()));
            }
            break;
        case MsgType::log:
            in.log = decode_log(f.payload);
            break;
        case MsgType::heartbeat:
        case MsgType::started:
            break;
        case MsgType::metrics:
            try {
                load_from(f.payload, in.metrics);
            } catch (const std::exception& e) {
                throw ProtocolError(fmt::format("unreadable metrics frame: {}", e.what()));
            }
            break;
        default:
            throw ProtocolError(
                fmt::format("unexpected {} frame from the worker", msg_type_name(f.header.type)));
    }
    return true;
}

bool ClientChannel::has_buffered() const noexcept {
    return frames_ && frames_->has_buffered_frame();
}

void ClientChannel::write(const Outgoing& o) {
    std::vector<std::span<const std::byte>> spans;
    std::size_t from = 0;
    for (auto& [at, buf] : o.big) {
        spans.push_back(o.small.span().subspan(from, at - from));
        spans.push_back(buf->span());
        from = at;
    }
    spans.push_back(o.small.span().subspan(from));
    transport_->write_all(spans);
}

void ClientChannel::write_control(MsgType type, std::uint64_t call_id) {
    std::byte h[frame_header_size];
    encode_header(h, type, call_id, 0);
    std::span<const std::byte> one[] = {{h, frame_header_size}};
    transport_->write_all(one);
}

void ClientChannel::write_frame(MsgType type, std::span<const std::byte> payload,
                                std::uint64_t call_id, std::uint16_t flags) {
    std::byte h[frame_header_size];
    encode_header(h, type, call_id, payload.size(), flags);
    std::span<const std::byte> parts[] = {{h, frame_header_size}, payload};
    transport_->write_all(parts);
}

}  // namespace sky::detail
