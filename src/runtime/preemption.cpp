#include "runtime/preemption.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/worker_context.hpp"
#include "sky/detail/serialize.hpp"
#include "sky/errors.hpp"

namespace sky::detail {

namespace {

// Constant-initialised: readable before main and after any other static's destruction.
std::atomic<const Preemption*> current_notice{nullptr};
std::atomic<std::uint64_t> progress_changes{0};
std::atomic<std::int64_t> progress_step{0};
std::atomic<bool> progress_fresh{true};  // the next relayed step replaces the highest

struct Published {
    std::mutex m;
    // Every notice ever published, never freed before exit: a reader holds no lock, so a notice
    // must outlive any load of its pointer. A pool publishes one per cloud notice: a handful.
    std::vector<std::unique_ptr<const Preemption>> kept;
};
Published& published() {
    static auto* p = new Published;  // never destroyed: executor threads may read at exit
    return *p;
}

bool same(const Preemption& a, const Preemption& b) {
    return a.deadline == b.deadline && a.node == b.node && a.instance_id == b.instance_id &&
           a.reason == b.reason && a.checkpoint_step == b.checkpoint_step;
}

}  // namespace

void publish_preemption(const std::optional<Preemption>& notice) {
    auto& p = published();
    std::lock_guard lk(p.m);
    if (!notice) {
        current_notice.store(nullptr, std::memory_order_release);
        return;
    }
    for (auto& k : p.kept)
        if (same(*k, *notice)) {
            current_notice.store(k.get(), std::memory_order_release);
            return;
        }
    p.kept.push_back(std::make_unique<const Preemption>(*notice));
    current_notice.store(p.kept.back().get(), std::memory_order_release);
}

std::optional<Preemption> decode_preempt(std::span<const std::byte> payload) {
    if (payload.empty()) return std::nullopt;
    PreemptMsg m;
    try {
        load_from(payload, m);
    } catch (const std::exception& e) {
        throw ProtocolError(fmt::format("unreadable preempt frame: {}", e.what()));
    }
    Preemption p;
    p.deadline = std::chrono::system_clock::time_point(std::chrono::milliseconds(m.deadline_ms));
    p.node = m.node;
    p.instance_id = std::move(m.instance_id);
    p.reason = std::move(m.reason);
    p.checkpoint_step = m.checkpoint_step;
    return p;
}

Buffer encode_preempt(const std::optional<Preemption>& notice) {
    Buffer b;
    if (!notice) return b;
    PreemptMsg m;
    m.deadline_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(notice->deadline.time_since_epoch())
            .count();
    m.node = notice->node;
    m.instance_id = notice->instance_id;
    m.reason = notice->reason;
    m.checkpoint_step = notice->checkpoint_step;
    save_to(b, m);
    return b;
}

namespace {

// One line of at most `max` bytes: a reason travels in a frame and shows in an event.
std::string one_line(std::string_view s, std::size_t max = 512) {
    std::string out(s.substr(0, s.find('\n')));
    if (!out.empty() && out.back() == '\r') out.pop_back();
    if (out.size() > max) out.resize(max);
    for (char& c : out)
        if (static_cast<unsigned char>(c) < 0x20) c = ' ';
    return out;
}

// "KIND NUMBER REST": the kind ("reclaim" or "warn"), the number, the rest of the line.
bool split_notice(std::string_view line, bool& firm, long long& number, std::string& rest) {
    const auto sp = line.find(' ');
    const std::string_view kind = line.substr(0, sp);
    if (kind == "reclaim")
        firm = true;
    else if (kind == "warn")
        firm = false;
    else
        return false;
    if (sp == std::string_view::npos) return false;
    std::string_view tail = line.substr(sp + 1);
    const auto sp2 = tail.find(' ');
    const std::string_view num = tail.substr(0, sp2);
    if (num.empty() || num.size() > 13 || num.find_first_not_of("0123456789") != num.npos)
        return false;
    number = std::stoll(std::string(num));
    rest = sp2 == std::string_view::npos ? std::string() : one_line(tail.substr(sp2 + 1));
    return true;
}

}  // namespace

NodeNotice parse_probe_output(std::string_view out, std::chrono::system_clock::time_point now) {
    NodeNotice n;
    bool firm = true;
    long long seconds = 0;
    std::string reason;
    // Seconds past 2096 would overflow the clock's nanoseconds further on: not a deadline.
    if (split_notice(one_line(out), firm, seconds, reason) && seconds < 4'000'000'000LL) {
        n.deadline = std::chrono::system_clock::time_point(std::chrono::seconds(seconds));
        n.firm = firm;
        n.reason = reason.empty() ? (firm ? "the provider is reclaiming this machine"
                                          : "the provider may reclaim this machine")
                                  : reason;
        return n;
    }
    n.deadline = now;
    n.firm = true;
    n.reason = "the provider is reclaiming this machine (its probe gave no deadline)";
    return n;
}

std::string format_notice_file(const NodeNotice& n) {
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(n.deadline.time_since_epoch())
            .count();
    return fmt::format("{} {} {}\n", n.firm ? "reclaim" : "warn", std::max<long long>(0, ms),
                       one_line(n.reason));
}

std::optional<NodeNotice> parse_notice_file(std::string_view text) {
    // A whole line only: the launcher writes the file atomically, but a foreign one may not be.
    if (text.find('\n') == std::string_view::npos) return std::nullopt;
    NodeNotice n;
    long long ms = 0;
    if (!split_notice(one_line(text), n.firm, ms, n.reason)) return std::nullopt;
    n.deadline = std::chrono::system_clock::time_point(std::chrono::milliseconds(ms));
    return n;
}

Buffer encode_notice(const NodeNotice& n) {
    NoticeMsg m;
    m.deadline_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(n.deadline.time_since_epoch())
            .count();
    m.firm = n.firm;
    m.reason = n.reason;
    Buffer b;
    save_to(b, m);
    return b;
}

NodeNotice decode_notice(std::span<const std::byte> payload) {
    NoticeMsg m;
    try {
        load_from(payload, m);
    } catch (const std::exception& e) {
        throw ProtocolError(fmt::format("unreadable notice frame: {}", e.what()));
    }
    NodeNotice n;
    n.deadline = std::chrono::system_clock::time_point(std::chrono::milliseconds(m.deadline_ms));
    n.firm = m.firm;
    n.reason = one_line(m.reason);
    return n;
}

ProgressSnapshot progress_snapshot() noexcept {
    ProgressSnapshot s;
    s.changes = progress_changes.load(std::memory_order_acquire);
    s.step = progress_step.load(std::memory_order_relaxed);
    return s;
}

void relay_progress(std::int64_t step) noexcept {
    // The highest step of the node's worker processes: ranks of a collective are within a step
    // of each other, and the pool wants the highest.
    if (progress_fresh.exchange(false, std::memory_order_relaxed)) {
        progress_step.store(step, std::memory_order_relaxed);
    } else {
        std::int64_t now = progress_step.load(std::memory_order_relaxed);
        while (step > now &&
               !progress_step.compare_exchange_weak(now, step, std::memory_order_relaxed)) {
        }
    }
    progress_changes.fetch_add(1, std::memory_order_release);
}

void progress_cleared() noexcept { progress_fresh.store(true, std::memory_order_relaxed); }

}  // namespace sky::detail

namespace sky::inline v0 {

std::optional<Preemption> preemption() {
    const Preemption* p = detail::current_notice.load(std::memory_order_acquire);
    if (!p) return std::nullopt;
    return *p;
}

void progress(std::int64_t step) {
    if (!detail::in_worker.load(std::memory_order_relaxed)) return;
    detail::progress_step.store(step, std::memory_order_relaxed);
    detail::progress_changes.fetch_add(1, std::memory_order_release);
}

}  // namespace sky::inline v0
