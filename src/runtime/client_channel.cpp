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

ClientHandshake::ClientHandshake(ClientChannel::Handshake h, std::string name,
                                 Clock::time_point now)
    : h_(std::move(h)), name_(std::move(name)), deadline_(now + h_.hello_bound) {}

std::uint64_t ClientHandshake::frame_limit() const noexcept {
    // Until the worker has proven it holds the token, frames are limited to the fixed size of
    // the auth frames, and nothing it sends is decoded; then the hello is decoded with a bounded
    // archive.
    return stage_ == Stage::challenge || stage_ == Stage::proof ? auth_max_frame : hello_max_frame;
}

Buffer ClientHandshake::on_frame(const Frame& f, Clock::time_point now) {
    Buffer out;
    switch (stage_) {
        case Stage::challenge:
            try {
                answer_ = client_auth_answer(h_.token, f, h_.seal);
            } catch (const ProtocolError& e) {
                throw ProtocolError(fmt::format("{}: {}", name_, e.what()));
            }
            out = std::move(answer_.frame);
            stage_ = Stage::proof;
            deadline_ = now + h_.hello_bound;
            return out;
        case Stage::proof:
            try {
                check_worker_proof(answer_, worker_auth_block(f, "proof"));
            } catch (const ProtocolError& e) {
                throw ProtocolError(fmt::format("{}: {}", name_, e.what()));
            }
            stage_ = Stage::hello;
            deadline_ = now + h_.hello_bound;
            return out;
        case Stage::hello: {
            if (f.header.type != MsgType::hello)
                throw Error(
                    fmt::format("{}: the worker closed the connection before its hello", name_));
            WorkerHello wh;
            try {
                load_from(f.payload, wh);
            } catch (const std::exception& e) {
                throw ProtocolError(
                    fmt::format("{}: unreadable worker hello: {}", name_, e.what()));
            }
            if (wh.protocol != protocol_version)
                throw ProtocolError(fmt::format("{}: worker speaks protocol {}, this client {}",
                                                name_, wh.protocol, protocol_version));
            if (wh.build_id != self_build_id())
                throw ProtocolError(fmt::format(
                    "{}: the worker runs a different build of the program (build id {}, this "
                    "client {})",
                    name_, wh.build_id, self_build_id()));
            Buffer payload;
            save_to(payload, h_.hello);
            out.resize(frame_header_size);
            encode_header(out.data(), MsgType::hello, 0, payload.size());
            out.append(payload.data(), payload.size());
            // The worker answers once its worker processes run (one per GPU or MIG slice): how
            // many, and a free port for each. One bound for the whole wait: a worker that keeps
            // sending logs or heartbeats and never its ready frame is not waited for forever.
            stage_ = Stage::ready;
            deadline_ = now + h_.ready_bound;
            return out;
        }
        case Stage::ready:
            try {
                if (f.header.type == MsgType::ready) {
                    load_from(f.payload, ready_);
                } else if (f.header.type == MsgType::log) {
                    auto m = decode_log(f.payload);
                    if (h_.on_log) h_.on_log(std::move(m));
                    return out;
                } else if (f.header.type == MsgType::heartbeat) {
                    return out;
                } else {
                    throw ProtocolError(fmt::format("a {} frame before the worker's ready frame",
                                                    msg_type_name(f.header.type)));
                }
            } catch (const std::exception& e) {
                throw ProtocolError(fmt::format("{}: {}", name_, e.what()));
            }
            if (ready_.workers < 1 || ready_.workers > 1024 ||
                ready_.ports.size() != static_cast<std::size_t>(ready_.workers))
                throw ProtocolError(fmt::format(
                    "{}: the worker's ready frame names {} worker processes and {} ports", name_,
                    ready_.workers, ready_.ports.size()));
            stage_ = Stage::done;
            return out;
        case Stage::done:
            break;
    }
    return out;
}

void ClientHandshake::bad_frame(const std::exception& e) const {
    switch (stage_) {
        case Stage::challenge:
        case Stage::proof:
            throw ProtocolError(
                fmt::format("{}: authentication failed: bad {} from the peer: {}", name_,
                            stage_ == Stage::challenge ? "challenge" : "proof", e.what()));
        case Stage::hello:
            throw ProtocolError(fmt::format("{}: bad hello from the worker: {}", name_, e.what()));
        default:
            throw ProtocolError(fmt::format("{}: {}", name_, e.what()));
    }
}

void ClientHandshake::ended() const {
    switch (stage_) {
        case Stage::challenge:
        case Stage::proof:
            throw Error(fmt::format("{}: the worker closed the connection before its {}", name_,
                                    stage_ == Stage::challenge ? "challenge" : "proof"));
        case Stage::hello:
            throw Error(
                fmt::format("{}: the worker closed the connection before its hello", name_));
        default:
            throw ProtocolError(
                fmt::format("{}: the worker closed the connection before it was ready", name_));
    }
}

void ClientHandshake::timed_out() const {
    const auto s = [](std::chrono::seconds d) { return d.count(); };
    switch (stage_) {
        case Stage::challenge:
        case Stage::proof:
            throw Error(fmt::format("{}: no {} from the worker within {} s", name_,
                                    stage_ == Stage::challenge ? "challenge" : "proof",
                                    s(h_.hello_bound)));
        case Stage::hello:
            throw Error(
                fmt::format("{}: no hello from the worker within {} s", name_, s(h_.hello_bound)));
        default:
            throw Error(
                fmt::format("{}: the worker was not ready within {} s", name_, s(h_.ready_bound)));
    }
}

void ClientHandshake::failed(const std::string& why) const {
    throw Error(fmt::format("{}: {}", name_, why));
}

WorkerReady ClientChannel::handshake(const Handshake& h) {
    using Clock = std::chrono::steady_clock;
    ClientHandshake steps(h, name_, Clock::now());
    auto reader = std::make_unique<FrameReader>(*transport_, steps.frame_limit());
    std::uint64_t limit = steps.frame_limit();
    while (!steps.done()) {
        if (steps.frame_limit() != limit) {
            limit = steps.frame_limit();
            reader = std::make_unique<FrameReader>(std::move(*reader), limit);
        }
        // The next frame often came in the same read as the last one: wait only when it is not
        // here.
        if (!reader->has_buffered_frame()) {
            const auto left =
                std::chrono::ceil<std::chrono::milliseconds>(steps.deadline() - Clock::now());
            if (left.count() <= 0 || !transport_->wait_readable(left)) steps.timed_out();
        }
        Frame f;
        bool got = false;
        try {
            got = reader->next(f);
        } catch (const ProtocolError& e) {
            steps.bad_frame(e);
        } catch (const std::exception& e) {
            steps.failed(e.what());
        }
        if (!got) steps.ended();
        Buffer answer = steps.on_frame(f, Clock::now());
        if (auto keys = steps.take_keys()) {
            // Everything after the worker's proof is sealed, what this reader holds already too.
            const auto rest = reader->take_buffered();
            transport_ = std::make_unique<io::SealedTransport>(std::move(transport_), *keys, rest);
            reader = std::make_unique<FrameReader>(*transport_, limit);
        }
        if (answer.empty()) continue;
        try {
            write_bytes(answer.span());
        } catch (const std::exception& e) {
            steps.failed(e.what());
        }
    }
    // The reader goes on with whatever this one has buffered.
    frames_ = std::make_unique<FrameReader>(std::move(*reader), h.max_frame);
    return steps.ready();
}

bool ClientChannel::next_frame(Frame& f) { return frames_ && frames_->next(f); }

void decode_incoming(Frame& f, Incoming& in) {
    in.type = f.header.type;
    in.call_id = f.header.call_id;
    switch (f.header.type) {
        case MsgType::result:
            if (f.owned.data() == f.payload.data() && f.owned.size() == f.payload.size()) {
                in.payload = f.take_payload();
            } else {
                // A block of its size, not a growing buffer's first 256 bytes: a gather keeps
                // one per result until the caller takes them.
                in.payload = Buffer(f.payload.size());
                in.payload.append(f.payload.data(), f.payload.size());
            }
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
        case MsgType::progress:
            in.progress = decode_progress(f.payload);
            break;
        case MsgType::notice:
            in.notice = decode_notice(f.payload);
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
}

bool ClientChannel::next(Incoming& in) {
    if (!next_frame(frame_)) return false;
    decode_incoming(frame_, in);
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

void ClientChannel::write_bytes(std::span<const std::byte> bytes) {
    std::span<const std::byte> one[] = {bytes};
    transport_->write_all(one);
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
