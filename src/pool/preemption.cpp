#include "pool/preemption.hpp"

#include <algorithm>

#include "runtime/preemption.hpp"

namespace sky::detail {

PreemptionDesk::PreemptionDesk(int nodes)
    : steps_(static_cast<std::size_t>(std::max(0, nodes))),
      joined_(static_cast<std::size_t>(std::max(0, nodes))) {}

void PreemptionDesk::progress(int node, std::optional<std::int64_t> step) {
    std::lock_guard lk(m_);
    if (node >= 0 && static_cast<std::size_t>(node) < steps_.size())
        steps_[static_cast<std::size_t>(node)] = step;
}

std::optional<PreemptionNotice> PreemptionDesk::notice(PreemptionNotice raw) {
    std::lock_guard lk(m_);
    if (raw.node < 0 || static_cast<std::size_t>(raw.node) >= steps_.size()) return std::nullopt;
    if (auto it = notices_.find(raw.node);
        it != notices_.end() && it->second.instance_id == raw.instance_id) {
        if (it->second.deadline == raw.deadline && it->second.reason == raw.reason)
            return std::nullopt;  // the same notice again (a provider polled twice)
        it->second.deadline = raw.deadline;
        it->second.reason = raw.reason;
        fan_out_locked();
        return std::nullopt;
    }
    if (!notices_.empty()) {
        // Another machine's notice stands (a batch job's nodes are all warned at its end):
        // its step, so that every rank saves one step whichever machine goes first.
        raw.checkpoint_step = notices_.begin()->second.checkpoint_step;
    } else {
        // Picked once, here, for every rank: ranks of a collective are within a step of each
        // other, so the next step is one none of them has passed.
        std::optional<std::int64_t> highest;
        for (const auto& s : steps_)
            if (s) highest = std::max(highest.value_or(*s), *s);
        raw.checkpoint_step = highest ? *highest + 1 : -1;
    }
    Preemption p;
    p.deadline = raw.deadline;
    p.node = raw.node;
    p.instance_id = raw.instance_id;
    p.reason = raw.reason;
    p.checkpoint_step = raw.checkpoint_step;
    notices_[raw.node] = std::move(p);
    fan_out_locked();
    return raw;
}

void PreemptionDesk::joined(int node, const std::shared_ptr<NodeConnection>& conn) {
    std::lock_guard lk(m_);
    if (node < 0) return;
    // An elastic pool's node may join at an index past the ones it started with.
    if (static_cast<std::size_t>(node) >= joined_.size()) {
        joined_.resize(static_cast<std::size_t>(node) + 1);
        steps_.resize(static_cast<std::size_t>(node) + 1);
    }
    joined_[static_cast<std::size_t>(node)] = conn;
    if (auto s = standing_locked())
        conn->write_frame(MsgType::preempt, std::make_shared<const Buffer>(encode_preempt(s)));
}

void PreemptionDesk::node_replaced(int node) {
    std::lock_guard lk(m_);
    if (node < 0 || static_cast<std::size_t>(node) >= joined_.size()) return;
    steps_[static_cast<std::size_t>(node)].reset();
    if (notices_.erase(node) > 0) fan_out_locked();
}

void PreemptionDesk::node_gone(int node) {
    std::lock_guard lk(m_);
    if (node < 0 || static_cast<std::size_t>(node) >= joined_.size()) return;
    joined_[static_cast<std::size_t>(node)].reset();
    steps_[static_cast<std::size_t>(node)].reset();
    if (notices_.erase(node) > 0) fan_out_locked();
}

std::optional<Preemption> PreemptionDesk::standing() const {
    std::lock_guard lk(m_);
    return standing_locked();
}

std::optional<Preemption> PreemptionDesk::standing_locked() const {
    const Preemption* first = nullptr;
    for (const auto& [node, p] : notices_)
        if (!first || p.deadline < first->deadline) first = &p;
    if (!first) return std::nullopt;
    return *first;
}

void PreemptionDesk::fan_out_locked() {
    // One buffer for every node; an empty payload withdraws the notice.
    const auto payload = std::make_shared<const Buffer>(encode_preempt(standing_locked()));
    for (auto& w : joined_)
        if (auto c = w.lock()) c->write_frame(MsgType::preempt, payload);
}

}  // namespace sky::detail
