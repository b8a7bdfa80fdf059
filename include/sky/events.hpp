#pragma once
/// \file Events and callbacks (docs/api.md §9): what a pool reports while it lives.
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "sky/errors.hpp"
#include "sky/export.hpp"

SKY_PUBLIC_BEGIN

/// Provider-side infrastructure (key pair, security group) is being created.
struct InfraCreating {};
/// Provider-side infrastructure is ready in `region`.
struct InfraCreated {
    std::string region;  ///< empty where the cloud places each machine (offers name the region)
};
/// `count` instances of `instance_type` are being requested from `provider`.
struct InstanceLaunching {
    int count = 0;
    std::string instance_type;
    std::string provider;
};
/// An instance exists and has an address.
struct InstanceProvisioned {
    std::string instance_id;
    int node = 0;
    bool spot = false;
    std::string provider;
    std::optional<std::string> ip;
    std::optional<std::string> instance_type;
    std::optional<double> price_on_demand;
    std::optional<double> price_spot;
};
/// A node starts its bootstrap.
struct BootstrapStarting {
    std::string instance_id;
};
/// A bootstrap phase began ("check", "upload", "fetch", "cached", "apt", "pip", "env", "files",
/// "setup", "worker", "watchdog", ...). Steps that move the program ("upload": from this client,
/// "fetch": from another node of the pool) report again as bytes arrive.
struct BootstrapProgress {
    std::string instance_id;
    std::string step;
    std::uint64_t bytes_done = 0;   ///< bytes moved so far in this step (0 when not a transfer)
    std::uint64_t bytes_total = 0;  ///< bytes this step moves in all (0 when not a transfer)
};
/// A node's bootstrap finished; its worker is starting.
struct BootstrapCompleted {
    std::string instance_id;
};
/// Every node is connected; calls may run.
struct PoolStarted {
    std::string pool_id;
    int nodes = 0;
};
/// One line a compute function wrote to stdout or stderr on a node.
struct LogLine {
    int node = 0;
    std::string instance_id;
    std::string line;
    double timestamp = 0;  ///< seconds since the Unix epoch, taken on the node
};
/// A sample of a node's resource use (GPU fields empty where there is no GPU).
struct Metrics {
    std::string instance_id;
    int node = 0;
    double cpu_percent = 0;
    double memory_percent = 0;
    double memory_used_mb = 0;
    double memory_total_mb = 0;
    std::optional<double> gpu_utilization;
    std::optional<double> gpu_memory_used_mb;
    std::optional<double> gpu_memory_total_mb;
    std::optional<double> gpu_temperature;
};
/// The cloud warned that a node is about to be reclaimed; every rank of the pool now sees it as
/// sky::preemption(). Once per notice, before that node's InstancePreempted.
struct PreemptionNotice {
    int node = 0;
    std::string instance_id;
    std::chrono::system_clock::time_point deadline;  ///< when the cloud takes the machine back
    std::int64_t checkpoint_step = -1;  ///< the step every rank saves (-1: no rank reports one)
    std::string reason;                 ///< the provider's words
};
/// A spot instance was reclaimed by its provider.
struct InstancePreempted {
    std::string instance_id;
    int node = 0;
    std::string reason;
};
/// A node was replaced (after preemption, or after its worker crashed).
struct InstanceReplaced {
    std::string old_instance_id;
    std::string new_instance_id;
    int node = 0;
};
/// The pool is tearing down.
struct PoolStopping {};
/// One instance is being stopped/terminated.
struct InstanceStopping {
    std::string instance_id;
};
/// Running cost, sent periodically.
struct CostUpdate {
    double elapsed_seconds = 0;
    double accumulated_cost = 0;
    double hourly_rate = 0;
    int spot_count = 0;
    int ondemand_count = 0;
};
/// The pool's final cost, after teardown.
struct CostFinal {
    double total_cost = 0;
    double total_seconds = 0;
    double hourly_rate = 0;
    int spot_count = 0;
    int ondemand_count = 0;
    double savings_vs_ondemand = 0;
};
/// Something went wrong that did not (yet) fail a call: a node lost, a bad frame, a provider's
/// notice. The seeds' `Error` event: in C++ `sky::Error` is the base of the exceptions, so the
/// event has a name of its own and, like every event, is an aggregate (docs/api.md §9).
struct ErrorEvent {
    std::string message;
    std::optional<std::string> instance_id;  ///< set when it concerns one instance
};

/// An elastic pool's node count changed (docs/api.md §4a): once per decision, up or down.
struct PoolScaled {
    int from = 0;        ///< live and starting nodes before the decision
    int to = 0;          ///< after it
    std::string reason;  ///< the demand ("37 waiting + 8 running over 8 slots"), or the idle node
};
/// A node takes no new call and leaves once its calls finish (pool.drain, resize, scale-down).
struct NodeDraining {
    int node = 0;
    std::string instance_id;
    std::string reason;
};
/// The pool's spend reached PoolSpec::budget's warn_at x max_total_usd (sent once).
struct BudgetWarning {
    double spent_usd = 0;  ///< accrued when it was sent
    double limit_usd = 0;  ///< max_total_usd
};

/// Every event a pool can report.
using Event = std::variant<InfraCreating, InfraCreated, InstanceLaunching, InstanceProvisioned,
                           BootstrapStarting, BootstrapProgress, BootstrapCompleted, PoolStarted,
                           LogLine, Metrics, InstancePreempted, InstanceReplaced, PoolStopping,
                           InstanceStopping, CostUpdate, CostFinal, ErrorEvent, PreemptionNotice,
                           PoolScaled, NodeDraining, BudgetWarning>;

/// An event handler; an event it returns is dispatched in turn.
using Callback = std::function<std::optional<Event>(const Event&)>;

namespace detail {
/// One callback that calls each of `list` in order (an empty one is skipped) and returns the
/// first replacement event any of them returns (sky::compose). In libsky (src/pool/events.cpp).
Callback compose_callbacks(std::vector<Callback> list);
}  // namespace detail

/// One callback that calls each of `cbs` in order (each sees the same event).
template <class... Cbs>
Callback compose(Cbs... cbs) {
    return detail::compose_callbacks({Callback(std::move(cbs))...});
}

/// Sends `event` to every registered callback: the use_callback() stack (innermost first, on
/// this thread, before emit returns) and every live pool's PoolSpec::on_event and on<E>()
/// handlers (on that pool's event thread, in order with its own events; not its display). An
/// event a callback returns is emitted in turn. Safe from any thread, also from a handler.
void emit(const Event& event);

/// Removes its callback when it goes out of scope.
class CallbackGuard {
public:
    explicit CallbackGuard(std::size_t id) : id_(id) {}
    CallbackGuard(CallbackGuard&& o) noexcept : id_(o.id_) { o.id_ = 0; }
    CallbackGuard& operator=(CallbackGuard&&) = delete;
    CallbackGuard(const CallbackGuard&) = delete;
    ~CallbackGuard();

private:
    std::size_t id_;
};

/// Installs `cb` for every pool's events (and sky::emit) while the guard lives.
[[nodiscard]] CallbackGuard use_callback(Callback cb);

/// A one-line readable form of an event ("instance local-ab12-0 stopping").
std::string describe(const Event& event);

/// The events under their docs/api.md names; `events::Error` is the seeds' name of ErrorEvent.
namespace events {
using sky::BootstrapCompleted;
using sky::BootstrapProgress;
using sky::BootstrapStarting;
using sky::BudgetWarning;
using sky::CostFinal;
using sky::CostUpdate;
using sky::ErrorEvent;
using Error = sky::ErrorEvent;
using sky::InfraCreated;
using sky::InfraCreating;
using sky::InstanceLaunching;
using sky::InstancePreempted;
using sky::InstanceProvisioned;
using sky::InstanceReplaced;
using sky::InstanceStopping;
using sky::LogLine;
using sky::Metrics;
using sky::NodeDraining;
using sky::PoolScaled;
using sky::PoolStarted;
using sky::PoolStopping;
using sky::PreemptionNotice;
}  // namespace events

SKY_PUBLIC_END
