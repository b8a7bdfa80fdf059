#pragma once
// How many nodes an elastic pool wants, and which ones to start or end: one pure function of
// what the pool sees now. No threads, locks or I/O: the supervisor gathers the demand and its
// nodes under its lock, asks, and does what the decision says (a start is a replacement's launch,
// an end is a drain), so every rule is unit-tested in tables
// (tests/unit/pool/test_autoscale.cpp).
//
// The rules (peers' bugs they avoid in parentheses):
// - demand = calls waiting + in flight + pinned: running calls count, not only queued ones (a
//   pool that counts only pending work shrinks while it is busiest);
// - target = clamp(ceil(demand / capacity), min, max), and never 0 while demand > 0;
// - the whole shortfall starts in one decision (not one node per decision: a burst of 100 calls
//   on max = 8 starts 8 at once); a node that is still starting counts as there;
// - a node is ended only when it has been idle (nothing in flight, nothing pinned) for the whole
//   scale-down window: never a busy node, and demand that comes back within the window finds its
//   node still there (no stop and restart within a window);
// - the newest idle node goes first; node 0 (the head, where rendezvous lives) only as the last;
// - a new node takes the lowest index no node has;
// - a resize in progress (`desired`) sets the target instead of the demand: its shortfall starts
//   at once, and its surplus leaves idle nodes first (no window), then busy ones, which drain
//   (take no new call, end once their calls finish): never killed. Frozen nodes never leave.
#include <chrono>
#include <cstddef>
#include <optional>
#include <vector>

namespace sky::detail {

/// An elastic pool's bounds (sky::Autoscale's, after validation).
struct ScaleBounds {
    int min = 0;
    int max = 1;
    std::chrono::steady_clock::duration scaledown_window = std::chrono::seconds(60);
};

/// One node as the decision sees it.
struct ScaleNode {
    int index = 0;
    /// When it was started (a replacement: when the replacement was): newest goes first.
    std::chrono::steady_clock::time_point started_at{};
    /// Calls in flight on it, or pinned to it.
    std::size_t calls = 0;
    /// Since when it has had no call (meaningful while calls == 0).
    std::chrono::steady_clock::time_point idle_since{};
    /// Still starting (provisioning, bootstrap, handshake): counts as there, is never ended.
    bool starting = false;
    /// Already leaving (draining or being ended): neither counted nor chosen again; its index is
    /// still taken.
    bool leaving = false;
    /// Part of a distributed call's world that is frozen: never ended.
    bool frozen = false;
};

/// What the pool sees now.
struct ScaleInput {
    ScaleBounds bounds;
    std::size_t waiting = 0;    ///< calls waiting for any node
    std::size_t in_flight = 0;  ///< calls sent to a node and not answered
    std::size_t pinned = 0;     ///< calls waiting for one node (a broadcast's share)
    /// Calls one node runs at once (concurrency x its worker processes); at least 1.
    std::size_t capacity = 1;
    std::vector<ScaleNode> nodes;
    /// A resize in progress: the count it asked for (clamped to the bounds) is the target.
    std::optional<int> desired;
};

/// What to do: nodes to start (their indexes) and nodes to end: idle ones, newest first, then
/// (only for a resize) busy ones to drain, newest first; node 0 always last.
struct ScaleDecision {
    int target = 0;
    std::vector<int> start;
    std::vector<int> end;
    /// Nodes there (live or starting, not leaving) before the decision.
    int there = 0;
};

/// The demand the rules count: waiting + in flight + pinned.
[[nodiscard]] std::size_t scale_demand(const ScaleInput& in) noexcept;
/// clamp(ceil(demand / capacity), min, max), at least 1 while demand > 0; a resize's desired
/// count clamped to [min, max] while one is in progress.
[[nodiscard]] int scale_target(const ScaleInput& in) noexcept;
/// The decision at `now`.
[[nodiscard]] ScaleDecision decide_scale(const ScaleInput& in,
                                         std::chrono::steady_clock::time_point now);

}  // namespace sky::detail
