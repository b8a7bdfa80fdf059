#include "sky/events.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <mutex>
#include <utility>
#include <vector>

#include "pool/event_bus.hpp"

namespace sky::inline v0 {

namespace {
struct GlobalCallbacks {
    std::mutex m;
    std::size_t next = 1;
    std::vector<std::pair<std::size_t, Callback>> list;  // innermost last
};
GlobalCallbacks& globals() {
    static GlobalCallbacks g;
    return g;
}
std::string opt(const std::optional<std::string>& s) { return s ? *s : "-"; }
}  // namespace

CallbackGuard::~CallbackGuard() {
    if (!id_) return;
    auto& g = globals();
    std::lock_guard lk(g.m);
    std::erase_if(g.list, [&](auto& p) { return p.first == id_; });
}

CallbackGuard use_callback(Callback cb) {
    auto& g = globals();
    std::lock_guard lk(g.m);
    std::size_t id = g.next++;
    g.list.emplace_back(id, std::move(cb));
    return CallbackGuard(id);
}

namespace detail {

Callback compose_callbacks(std::vector<Callback> list) {
    return [list = std::move(list)](const Event& e) -> std::optional<Event> {
        std::optional<Event> out;
        for (auto& cb : list) {
            if (!cb) continue;
            auto r = cb(e);
            if (r && !out) out = std::move(r);
        }
        return out;
    };
}

}  // namespace detail

void emit(const Event& event) { detail::emit_everywhere(event, 0); }

std::string describe(const Event& event) {
    struct V {
        std::string operator()(const InfraCreating&) const { return "creating infrastructure"; }
        std::string operator()(const InfraCreated& e) const {
            // Empty where the cloud places each machine (its offers name their regions).
            return e.region.empty() ? std::string("infrastructure ready")
                                    : fmt::format("infrastructure ready in {}", e.region);
        }
        std::string operator()(const InstanceLaunching& e) const {
            return fmt::format("launching {} x {} on {}", e.count, e.instance_type, e.provider);
        }
        std::string operator()(const InstanceProvisioned& e) const {
            return fmt::format("node {}: {} provisioned ({}{}, {})", e.node, e.instance_id,
                               e.instance_type.value_or(e.provider), e.spot ? ", spot" : "",
                               opt(e.ip));
        }
        std::string operator()(const BootstrapStarting& e) const {
            return fmt::format("{}: bootstrap starting", e.instance_id);
        }
        std::string operator()(const BootstrapProgress& e) const {
            if (e.bytes_total > 0)
                return fmt::format("{}: bootstrap {} {:.1f}/{:.1f} MB", e.instance_id, e.step,
                                   static_cast<double>(e.bytes_done) / 1e6,
                                   static_cast<double>(e.bytes_total) / 1e6);
            return fmt::format("{}: bootstrap {}", e.instance_id, e.step);
        }
        std::string operator()(const BootstrapCompleted& e) const {
            return fmt::format("{}: bootstrap done", e.instance_id);
        }
        std::string operator()(const PoolStarted& e) const {
            return fmt::format("pool {} ready: {} node{}", e.pool_id, e.nodes,
                               e.nodes == 1 ? "" : "s");
        }
        std::string operator()(const LogLine& e) const {
            return fmt::format("[node {}] {}", e.node, e.line);
        }
        std::string operator()(const Metrics& e) const {
            std::string s =
                fmt::format("[node {}] cpu {:.0f}% mem {:.0f}% ({:.0f}/{:.0f} MB)", e.node,
                            e.cpu_percent, e.memory_percent, e.memory_used_mb, e.memory_total_mb);
            if (e.gpu_utilization)
                s += fmt::format(" gpu {:.0f}% {:.0f}/{:.0f} MB {:.0f}C", *e.gpu_utilization,
                                 e.gpu_memory_used_mb.value_or(0),
                                 e.gpu_memory_total_mb.value_or(0), e.gpu_temperature.value_or(0));
            return s;
        }
        std::string operator()(const InstancePreempted& e) const {
            return fmt::format("node {}: {} preempted ({})", e.node, e.instance_id, e.reason);
        }
        std::string operator()(const PreemptionNotice& e) const {
            const auto left = std::chrono::round<std::chrono::seconds>(
                e.deadline - std::chrono::system_clock::now());
            return e.checkpoint_step < 0
                       ? fmt::format(
                             "node {}: {} will be reclaimed in {} s ({}); no rank reports "
                             "progress: every rank saves now",
                             e.node, e.instance_id, left.count(), e.reason)
                       : fmt::format(
                             "node {}: {} will be reclaimed in {} s ({}); every rank "
                             "saves at step {}",
                             e.node, e.instance_id, left.count(), e.reason, e.checkpoint_step);
        }
        std::string operator()(const InstanceReplaced& e) const {
            return fmt::format("node {}: {} replaced by {}", e.node, e.old_instance_id,
                               e.new_instance_id);
        }
        std::string operator()(const PoolStopping&) const { return "pool stopping"; }
        std::string operator()(const InstanceStopping& e) const {
            return fmt::format("{}: stopping", e.instance_id);
        }
        std::string operator()(const CostUpdate& e) const {
            return fmt::format(
                "cost so far ${:.4f} after {:.0f} s (${:.3f}/h, {} spot, {} on-demand)",
                e.accumulated_cost, e.elapsed_seconds, e.hourly_rate, e.spot_count,
                e.ondemand_count);
        }
        std::string operator()(const CostFinal& e) const {
            return fmt::format(
                "total cost ${:.4f} for {:.1f} s (${:.3f}/h, {} spot, {} on-demand, "
                "saved ${:.4f} vs on-demand)",
                e.total_cost, e.total_seconds, e.hourly_rate, e.spot_count, e.ondemand_count,
                e.savings_vs_ondemand);
        }
        std::string operator()(const PoolScaled& e) const {
            return fmt::format("pool scaled from {} to {} node(s): {}", e.from, e.to, e.reason);
        }
        std::string operator()(const NodeDraining& e) const {
            return fmt::format("node {}: {} draining ({})", e.node, e.instance_id, e.reason);
        }
        std::string operator()(const BudgetWarning& e) const {
            return fmt::format("budget: ${:.4f} spent of ${:.2f} ({:.0f}%)", e.spent_usd,
                               e.limit_usd, e.limit_usd > 0 ? 100 * e.spent_usd / e.limit_usd : 0);
        }
        std::string operator()(const ErrorEvent& e) const {
            return e.instance_id ? fmt::format("error on {}: {}", *e.instance_id, e.message)
                                 : fmt::format("error: {}", e.message);
        }
    };
    return std::visit(V{}, event);
}

namespace detail {

std::vector<Event> call_global(const Event& event) {
    std::vector<Callback> cbs;
    {
        auto& g = globals();
        std::lock_guard lk(g.m);
        for (auto it = g.list.rbegin(); it != g.list.rend(); ++it) cbs.push_back(it->second);
    }
    std::vector<Event> answers;
    for (auto& cb : cbs) {
        if (!cb) continue;
        try {
            if (auto r = cb(event)) answers.push_back(std::move(*r));
        } catch (...) {
            // A throwing handler must not take the pool down.
        }
    }
    return answers;
}

}  // namespace detail
}  // namespace sky::inline v0
