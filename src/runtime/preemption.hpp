#pragma once
// A worker process's view of a preemption notice (api.md §10a): the notice the pool fanned out,
// published for sky::preemption() to read with one atomic load, and the latest step
// sky::progress() recorded, which the worker sends to its client.
#include <cstdint>
#include <optional>

#include "runtime/protocol.hpp"
#include "sky/instance.hpp"

namespace sky::detail {

/// Makes `notice` the one sky::preemption() returns in this process (nullopt: none stands).
/// Writers are serialised; readers never lock: each published notice is immutable and kept for
/// the life of the process, so a pointer a reader loaded stays valid.
void publish_preemption(const std::optional<Preemption>& notice);
/// The notice of a preempt frame's payload (empty: none). Throws ProtocolError when unreadable.
std::optional<Preemption> decode_preempt(std::span<const std::byte> payload);
/// The payload of a preempt frame for `notice` (empty for none).
Buffer encode_preempt(const std::optional<Preemption>& notice);

/// The latest step sky::progress() recorded in this process, and a count that changes with
/// every call of it (so a sender sees a step reported again as a change).
struct ProgressSnapshot {
    std::uint64_t changes = 0;
    std::int64_t step = 0;
};
[[nodiscard]] ProgressSnapshot progress_snapshot() noexcept;
/// A node's worker that relays its worker processes' progress: the highest step among them.
void relay_progress(std::int64_t step) noexcept;
/// No call reports progress any more (the worker told its client so): the next relayed step
/// starts the highest afresh.
void progress_cleared() noexcept;

}  // namespace sky::detail
