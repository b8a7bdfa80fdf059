#include "runtime/preemption.hpp"

#include <fmt/format.h>

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
