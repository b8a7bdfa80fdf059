#pragma once
// A worker process's view of a preemption notice (api.md §10a): the notice the pool fanned out,
// published for sky::preemption() to read with one atomic load, and the latest step
// sky::progress() recorded, which the worker sends to its client.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

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

/// A warning the node learned of on its own: its launcher's preemption probe answered, or the
/// batch system signalled the job (Slurm's --signal). The launcher writes it to the run
/// directory's notice file; the worker forwards it to its client in a notice frame; the client
/// makes it a PreemptionNotice. One channel for every provider whose node has a probe.
struct NodeNotice {
    std::chrono::system_clock::time_point deadline;  ///< when the machine goes (firm) or may go
    /// True: the machine goes at the deadline (the launcher ends the worker then, preempted);
    /// false: a softer warning, the deadline the earliest it could go (nothing ends).
    bool firm = true;
    std::string reason;  ///< the provider's words, one line

    friend bool operator==(const NodeNotice&, const NodeNotice&) = default;
};

/// What a preemption probe printed (its exit status was 0), as a notice at `now`. The probe's
/// first line is `reclaim SECONDS REASON...` (the machine goes at SECONDS since the epoch) or
/// `warn SECONDS REASON...` (it may go, at SECONDS at the earliest); anything else (nothing, a
/// bare yes) is a firm notice for `now`: the machine is being reclaimed, no deadline given.
NodeNotice parse_probe_output(std::string_view out, std::chrono::system_clock::time_point now);
/// The notice file's text: one line, `reclaim|warn MILLISECONDS REASON`.
std::string format_notice_file(const NodeNotice& n);
/// The notice a notice file holds; nullopt when `text` is not one (a partial or foreign file).
std::optional<NodeNotice> parse_notice_file(std::string_view text);
/// A notice frame's payload.
Buffer encode_notice(const NodeNotice& n);
/// Throws ProtocolError when unreadable.
NodeNotice decode_notice(std::span<const std::byte> payload);

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
