#pragma once
// The pool's side of a preemption notice (api.md §10a): the latest step each node reports
// (sky::progress), one notice per machine the cloud warned about, its agreed checkpoint step,
// and the fan-out of what stands to every node whose worker is ready, at once and to each that
// becomes ready while it stands. PoolCore hands it the notices, the progress frames and the
// nodes' joins and losses; it keeps no other pool state.
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "pool/node_connection.hpp"
#include "sky/events.hpp"
#include "sky/instance.hpp"

namespace sky::detail {

class PreemptionDesk {
public:
    explicit PreemptionDesk(int nodes);

    /// Node `node`'s worker reported its latest step (nullopt: none of its calls reports now).
    void progress(int node, std::optional<std::int64_t> step);
    /// A provider's notice (its checkpoint_step is ignored). A first notice for its machine gets
    /// the step every rank saves (1 + the highest step reported, -1 when none is; while another
    /// machine's notice stands, that notice's step: one step for all, whichever goes first) and
    /// goes to every ready node; returned so that the pool reports it. A later notice for the same
    /// machine (a firmer deadline after a softer warning) updates the deadline and reason the
    /// nodes see, keeps the step, and returns nullopt: one event per machine.
    std::optional<PreemptionNotice> notice(PreemptionNotice raw);
    /// Node `node`'s worker finished its handshake on `conn`: it gets what stands now, and
    /// every notice after.
    void joined(int node, const std::shared_ptr<NodeConnection>& conn);
    /// Node `node` was replaced: its machine's notice no longer stands (the nodes are told
    /// what stands instead) and its progress is forgotten; the replacement has joined already.
    void node_replaced(int node);
    /// Node `node` is gone for good: as node_replaced, and it is told nothing more.
    void node_gone(int node);

    /// What the workers see now (the earliest deadline among the standing notices).
    [[nodiscard]] std::optional<Preemption> standing() const;

private:
    std::optional<Preemption> standing_locked() const;
    /// Sends what stands to every joined node (under m_, so that a join in between cannot
    /// miss it).
    void fan_out_locked();

    mutable std::mutex m_;
    std::vector<std::optional<std::int64_t>> steps_;     // by node
    std::vector<std::weak_ptr<NodeConnection>> joined_;  // by node
    std::map<int, Preemption> notices_;                  // by node
};

}  // namespace sky::detail
