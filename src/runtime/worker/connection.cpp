#include "runtime/worker/connection.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include "sky/detail/registry.hpp"
#include "sky/detail/serialize.hpp"

namespace sky::detail {

namespace {
std::unique_ptr<Transport> transport_for(int fd, const std::optional<io::SealKeys>& keys) {
    auto plain = std::make_unique<FdTransport>(fd, "client connection");
    if (!keys) return plain;
    return std::make_unique<io::SealedTransport>(std::move(plain), *keys);
}
}  // namespace

Connection::Connection(int fd, WorkerCore& core, const std::optional<io::SealKeys>& keys)
    : core_(core), t_(transport_for(fd, keys)) {}

bool Connection::send(MsgType type, const Buffer& payload, const char* what) {
    try {
        Buffer f;
        append_frame(f, type, 0, payload.span());
        std::span<const std::byte> one[] = {f.span()};
        t_->write_all(one);
    } catch (const std::exception& e) {
        core_.say(fmt::format("cannot send the {}: {}", what, e.what()));
        return false;
    }
    return true;
}

bool Connection::send_hello() {
    WorkerHello wh;
    wh.build_id = self_build_id();
    wh.pid = ::getpid();
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    wh.hostname = host;
    for (auto& e : all_functions()) wh.functions.emplace_back(std::string(e.name), e.signature);
    Buffer payload;
    save_to(payload, wh);
    return send(MsgType::hello, payload, "hello");
}

bool Connection::read_hello(ClientHello& ch, std::chrono::milliseconds within) {
    if (!t_->wait_readable(within)) {
        core_.say(fmt::format("no hello from the client within {:g} s", within.count() / 1000.0));
        return false;
    }
    reader_ = std::make_unique<FrameReader>(*t_, 1 << 20);
    Frame f;
    // Whatever the client sends, a bad hello ends this connection with a message, never an
    // exception out of sky::init (std::terminate) or an allocation its sizes ask for.
    try {
        if (!reader_->next(f) || f.header.type != MsgType::hello) {
            core_.say("the first frame from the client was not a hello");
            return false;
        }
        load_from(f.payload, ch);
    } catch (const std::exception& e) {
        core_.say(fmt::format("unreadable hello from the client, closing: {}", e.what()));
        return false;
    }
    if (ch.protocol != protocol_version) {
        core_.say(fmt::format("the client speaks protocol {}, this worker {}; closing", ch.protocol,
                              protocol_version));
        return false;
    }
    return true;
}

bool Connection::send_ready(const WorkerReady& ready, std::uint64_t max_frame) {
    Buffer p;
    save_to(p, ready);
    if (!send(MsgType::ready, p, "ready frame")) return false;
    // Calls may follow the hello in the same read: the same reader serves them.
    reader_ = std::make_unique<FrameReader>(std::move(*reader_), max_frame);
    return true;
}

Connection::End Connection::serve(FrameHandler& h, Outbox& out,
                                  const std::function<void()>& heard) {
    FrameReader& reader = *reader_;
    Frame f;
    for (;;) {
        bool read = false;
        try {
            // Never wait for the client with calls not started or output unsent: a result
            // held back because another frame was buffered (a layout, a cancel) would wait
            // for the next write.
            if (!reader.has_buffered_frame()) {
                h.on_frames_taken();
                out.flush();
                read = true;
            }
            if (!reader.next(f)) return End::closed;  // the client went away
        } catch (const std::exception& e) {
            core_.say(fmt::format("closing the connection: {}", e.what()));
            return End::broken;
        }
        // Once per read, not per frame (it reads the clock): the frames read together arrived
        // together.
        if (read) heard();
        switch (f.header.type) {
            case MsgType::call:
                h.on_call(f);
                break;
            case MsgType::cancel:
                h.on_cancel(f.header.call_id);
                break;
            case MsgType::confirm:
                h.on_confirm(f.header.call_id);
                break;
            case MsgType::ack:
                try {
                    h.on_ack(decode_ack(f.payload));
                } catch (const std::exception& e) {
                    core_.say(fmt::format("closing the connection: {}", e.what()));
                    return End::broken;
                }
                break;
            case MsgType::layout:
                h.on_layout(f.payload);
                break;
            case MsgType::preempt:
                h.on_preempt(f.payload);
                break;
            case MsgType::heartbeat:
                try {
                    out.append(MsgType::heartbeat, 0, {});
                    out.flush();
                } catch (const std::exception& e) {
                    core_.say(fmt::format("the client connection broke: {}", e.what()));
                    return End::broken;
                }
                break;
            case MsgType::shutdown:
                return End::shutdown;
            default:
                core_.say(
                    fmt::format("ignoring an unexpected {} frame", msg_type_name(f.header.type)));
        }
    }
}

}  // namespace sky::detail
