#include "runtime/protocol.hpp"

#include <fmt/format.h>
#include <link.h>

#include <chrono>
#include <fstream>
#include <mutex>

#include "runtime/build_id.hpp"
#include "sky/detail/registry.hpp"
#include "sky/detail/serialize.hpp"
#include "sky/errors.hpp"

namespace sky::detail {

const char* msg_type_name(MsgType t) noexcept {
    switch (t) {
        case MsgType::hello:
            return "hello";
        case MsgType::call:
            return "call";
        case MsgType::result:
            return "result";
        case MsgType::error:
            return "error";
        case MsgType::log:
            return "log";
        case MsgType::metrics:
            return "metrics";
        case MsgType::heartbeat:
            return "heartbeat";
        case MsgType::cancel:
            return "cancel";
        case MsgType::shutdown:
            return "shutdown";
        case MsgType::auth:
            return "auth";
        case MsgType::ready:
            return "ready";
        case MsgType::layout:
            return "layout";
        case MsgType::progress:
            return "progress";
        case MsgType::preempt:
            return "preempt";
        case MsgType::notice:
            return "notice";
        case MsgType::started:
            return "started";
        case MsgType::confirm:
            return "confirm";
        case MsgType::ack:
            return "ack";
    }
    return "unknown";
}

FrameHeader decode_header(const std::byte* in, std::uint64_t max_frame) {
    FrameHeader h;
    std::memcpy(&h.magic, in, 4);
    std::memcpy(&h.version, in + 4, 1);
    std::uint8_t type = 0;
    std::memcpy(&type, in + 5, 1);
    std::memcpy(&h.flags, in + 6, 2);
    std::memcpy(&h.call_id, in + 8, 8);
    std::memcpy(&h.length, in + 16, 8);
    if (h.magic != frame_magic)
        throw ProtocolError(
            fmt::format("bad frame magic 0x{:08x} (expected 0x{:08x}): the peer "
                        "is not a sky worker or the stream is corrupt",
                        h.magic, frame_magic));
    if (h.version != protocol_version)
        throw ProtocolError(fmt::format("unsupported protocol version {} (this build speaks {})",
                                        h.version, protocol_version));
    if (type < static_cast<std::uint8_t>(MsgType::hello) ||
        type > static_cast<std::uint8_t>(MsgType::notice))
        throw ProtocolError(fmt::format("unknown frame type {}", type));
    h.type = static_cast<MsgType>(type);
    if (h.length > max_frame)
        throw ProtocolError(
            fmt::format("frame of {} bytes is over the limit of {} bytes", h.length, max_frame));
    return h;
}

bool FrameReader::fill(std::size_t need) {
    // Compact so the buffer does not grow without bound.
    if (pos_ > 0 && (pos_ == buf_.size() || pos_ > (1u << 20))) {
        buf_.consume(pos_);
        pos_ = 0;
    }
    while (buf_.size() - pos_ < need) {
        std::size_t have = buf_.size();
        std::size_t want = std::max<std::size_t>(need - (have - pos_), 64 * 1024);
        buf_.resize(have + want);
        std::size_t n = 0;
        try {
            n = t_.read_some({buf_.data() + have, want});
        } catch (...) {
            buf_.resize(have);
            throw;
        }
        buf_.resize(have + n);
        if (n == 0) return false;
    }
    return true;
}

bool FrameReader::has_buffered_frame() const noexcept {
    std::size_t avail = buf_.size() - pos_;
    if (avail < frame_header_size) return false;
    std::uint64_t len = 0;
    std::memcpy(&len, buf_.data() + pos_ + 16, 8);
    return avail - frame_header_size >= len;
}

std::vector<std::byte> FrameReader::take_buffered() {
    std::vector<std::byte> out(buf_.data() + pos_, buf_.data() + buf_.size());
    buf_.clear();
    pos_ = 0;
    return out;
}

bool FrameReader::next(Frame& f) {
    if (!fill(frame_header_size)) {
        if (buf_.size() - pos_ == 0) return false;
        throw ProtocolError(fmt::format("stream ended inside a frame header ({} of {} bytes)",
                                        buf_.size() - pos_, frame_header_size));
    }
    f.header = decode_header(buf_.data() + pos_, max_frame_);
    const std::uint64_t len = f.header.length;
    std::size_t avail = buf_.size() - pos_ - frame_header_size;
    if (len > (4u << 20) && avail < len) {
        // A large payload: read it straight into a buffer of its own (no second copy). The
        // buffer grows as the bytes arrive (doubling; realloc remaps large blocks), so a header
        // alone never costs what its length field claims, up to the frame limit.
        const auto room_for = [len](std::size_t have) {
            return static_cast<std::size_t>(std::min<std::uint64_t>(len, 2 * have + (4u << 20)));
        };
        f.owned = Buffer();
        f.owned.reserve(room_for(avail));
        f.owned.resize(room_for(avail));
        std::memcpy(f.owned.data(), buf_.data() + pos_ + frame_header_size, avail);
        pos_ = buf_.size();
        std::size_t got = avail;
        while (got < len) {
            if (got == f.owned.size()) {
                f.owned.reserve(room_for(got));
                f.owned.resize(room_for(got));
            }
            std::size_t n = t_.read_some({f.owned.data() + got, f.owned.size() - got});
            if (n == 0)
                throw ProtocolError(fmt::format("stream ended inside a {} frame ({} of {} bytes)",
                                                msg_type_name(f.header.type), got, len));
            got += n;
        }
        f.payload = f.owned.span();
        return true;
    }
    if (!fill(frame_header_size + len))
        throw ProtocolError(fmt::format("stream ended inside a {} frame ({} of {} bytes)",
                                        msg_type_name(f.header.type),
                                        buf_.size() - pos_ - frame_header_size, len));
    f.payload = {buf_.data() + pos_ + frame_header_size, static_cast<std::size_t>(len)};
    f.owned.clear();
    pos_ += frame_header_size + len;
    return true;
}

void append_call_header(Buffer& out, std::string_view function, std::uint64_t signature) {
    auto n = static_cast<std::uint16_t>(function.size());
    out.append(&n, 2);
    out.append(function.data(), n);
    static constexpr std::byte zeros[8] = {};
    out.append(zeros, call_header_size(n) - 8 - 2 - n);
    out.append(&signature, 8);
}

CallHeader decode_call(std::span<const std::byte> p) {
    if (p.size() < 2) throw ProtocolError("call frame too short for its header");
    std::uint16_t n = 0;
    std::memcpy(&n, p.data(), 2);
    const std::size_t header = call_header_size(n);
    if (p.size() < header) throw ProtocolError("call frame too short for its function name");
    CallHeader c;
    c.function = {reinterpret_cast<const char*>(p.data() + 2), n};
    std::memcpy(&c.signature, p.data() + header - 8, 8);
    c.args = p.subspan(header);
    return c;
}

void append_call_plugin(Buffer& out, const CallPlugin& plugin) {
    Buffer block;
    save_to(block, plugin);
    const auto n = static_cast<std::uint32_t>(block.size());
    out.append(&n, 4);
    out.append(block.data(), block.size());
    static constexpr std::byte zeros[8] = {};
    out.append(zeros, (8 - (4 + block.size()) % 8) % 8);
}

std::span<const std::byte> decode_call_plugin(std::span<const std::byte> p, std::uint16_t flags,
                                              CallPlugin& plugin) {
    if (!(flags & call_flag_plugin)) return p;
    if (p.size() < 4) throw ProtocolError("call frame too short for its plugin block");
    std::uint32_t n = 0;
    std::memcpy(&n, p.data(), 4);
    const std::size_t padded = (4 + std::size_t{n} + 7) / 8 * 8;
    if (n > 4096 || p.size() < padded) throw ProtocolError("call frame with a bad plugin block");
    try {
        load_from(p.subspan(4, n), plugin);
    } catch (const std::exception& e) {
        throw ProtocolError(std::string("unreadable plugin block in a call frame: ") + e.what());
    }
    return p.subspan(padded);
}

void append_log_frame(Buffer& out, std::uint64_t call_id, std::uint8_t stream, double timestamp,
                      std::string_view line) {
    std::size_t at = out.size();
    out.resize(at + frame_header_size);
    encode_header(out.data() + at, MsgType::log, call_id, 9 + line.size());
    out.append(&stream, 1);
    out.append(&timestamp, 8);
    out.append(line.data(), line.size());
}

LogMsg decode_log(std::span<const std::byte> p) {
    if (p.size() < 9) throw ProtocolError("log frame too short");
    LogMsg m;
    std::memcpy(&m.stream, p.data(), 1);
    std::memcpy(&m.timestamp, p.data() + 1, 8);
    m.line.assign(reinterpret_cast<const char*>(p.data() + 9), p.size() - 9);
    return m;
}

void append_ack_frame(Buffer& out, std::span<const std::uint64_t> call_ids) {
    const std::size_t at = out.size();
    out.resize(at + frame_header_size);
    encode_header(out.data() + at, MsgType::ack, 0, call_ids.size_bytes());
    out.append(call_ids.data(), call_ids.size_bytes());
}

void append_progress_frame(Buffer& out, std::optional<std::int64_t> step) {
    const std::size_t at = out.size();
    out.resize(at + frame_header_size);
    encode_header(out.data() + at, MsgType::progress, 0, step ? 8 : 0);
    if (step) out.append(&*step, 8);
}

std::optional<std::int64_t> decode_progress(std::span<const std::byte> p) {
    if (p.empty()) return std::nullopt;
    if (p.size() != 8)
        throw ProtocolError(fmt::format("a progress frame of {} bytes (not 0 or 8)", p.size()));
    std::int64_t step = 0;
    std::memcpy(&step, p.data(), 8);
    return step;
}

std::vector<std::uint64_t> decode_ack(std::span<const std::byte> p) {
    if (p.size() % 8 != 0)
        throw ProtocolError(
            fmt::format("an ack frame of {} bytes (not a multiple of 8)", p.size()));
    std::vector<std::uint64_t> ids(p.size() / 8);
    if (!p.empty()) std::memcpy(ids.data(), p.data(), p.size());
    return ids;
}

namespace {
int find_build_id(dl_phdr_info* info, std::size_t, void* out) {
    if (info->dlpi_name && info->dlpi_name[0]) return 0;  // only the main program
    *static_cast<std::string*>(out) = build_id_hex(*info);
    return 1;
}
}  // namespace

const std::string& self_build_id() {
    static const std::string id = [] {
        std::string s;
        dl_iterate_phdr(find_build_id, &s);
        if (s.empty()) {
            // No build-id note: hash the executable's bytes instead.
            std::ifstream f("/proc/self/exe", std::ios::binary);
            std::uint64_t h = fnv1a_basis;
            char buf[65536];
            while (f.read(buf, sizeof buf) || f.gcount() > 0) {
                h = fnv1a({buf, static_cast<std::size_t>(f.gcount())}, h);
                if (!f) break;
            }
            s = fmt::format("fnv-{:016x}", h);
        }
        return s;
    }();
    return id;
}

double unix_now() noexcept {
    using namespace std::chrono;
    return duration<double>(system_clock::now().time_since_epoch()).count();
}

}  // namespace sky::detail
