#include "pool/autoscale.hpp"

#include <algorithm>
#include <set>

namespace sky::detail {

std::size_t scale_demand(const ScaleInput& in) noexcept {
    return in.waiting + in.in_flight + in.pinned;
}

int scale_target(const ScaleInput& in) noexcept {
    const std::size_t demand = scale_demand(in);
    const std::size_t capacity = std::max<std::size_t>(1, in.capacity);
    const int max = std::max(1, in.bounds.max);
    const int min = std::clamp(in.bounds.min, 0, max);
    // A resize asked for a count: that, within the bounds (0 included: a resize to zero waits
    // for nothing; the calls that wait wake the pool again once it is done).
    if (in.desired) return std::clamp(*in.desired, min, max);
    const std::size_t wanted = (demand + capacity - 1) / capacity;
    const int target =
        wanted >= static_cast<std::size_t>(max) ? max : std::max(min, static_cast<int>(wanted));
    // max >= 1: demand > 0 always gets a node.
    return demand > 0 ? std::max(target, 1) : target;
}

ScaleDecision decide_scale(const ScaleInput& in, std::chrono::steady_clock::time_point now) {
    ScaleDecision d;
    d.target = scale_target(in);
    std::set<int> taken;
    int there = 0;
    for (const auto& n : in.nodes) {
        taken.insert(n.index);
        if (!n.leaving) ++there;
    }
    d.there = there;
    if (there < d.target) {
        // The whole shortfall at once, at the lowest free indexes.
        for (int i = 0; static_cast<int>(d.start.size()) < d.target - there; ++i)
            if (!taken.count(i)) d.start.push_back(i);
        return d;
    }
    int surplus = there - d.target;
    if (surplus == 0) return d;
    // Idle for the whole window, not starting, not frozen: newest first, node 0 last.
    std::vector<const ScaleNode*> idle;
    for (const auto& n : in.nodes)
        if (!n.leaving && !n.starting && !n.frozen && n.calls == 0 &&
            now - n.idle_since >= in.bounds.scaledown_window)
            idle.push_back(&n);
    const auto newest_first = [](const ScaleNode* a, const ScaleNode* b) {
        if ((a->index == 0) != (b->index == 0)) return b->index == 0;
        if (a->started_at != b->started_at) return a->started_at > b->started_at;
        return a->index > b->index;
    };
    std::sort(idle.begin(), idle.end(), newest_first);
    // A resize drains busy nodes too, after every idle one: they end once their calls finish.
    std::vector<const ScaleNode*> busy;
    if (in.desired) {
        for (const auto& n : in.nodes)
            if (!n.leaving && !n.frozen && !n.starting &&
                std::find(idle.begin(), idle.end(), &n) == idle.end())
                (n.calls == 0 ? idle : busy).push_back(&n);
        std::sort(idle.begin(), idle.end(), newest_first);
        std::sort(busy.begin(), busy.end(), newest_first);
        // A node still starting leaves at a later decision, once it has started.
    }
    std::vector<const ScaleNode*> order = idle;
    order.insert(order.end(), busy.begin(), busy.end());
    // The head goes only as the last node there: after every other candidate.
    std::stable_partition(order.begin(), order.end(),
                          [](const ScaleNode* n) { return n->index != 0; });
    for (const ScaleNode* n : order) {
        if (surplus == 0) break;
        if (n->index == 0 && there - static_cast<int>(d.end.size()) > 1) continue;
        d.end.push_back(n->index);
        --surplus;
    }
    return d;
}

}  // namespace sky::detail
