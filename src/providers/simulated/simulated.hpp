#pragma once
// sky::Simulated (api.md §5a): one more adapter on the cloud layer (providers/cloud). Its
// "cloud" is a table in this process: offers are AWS's catalog rows relabelled, launches fail
// with capacity errors as asked, machines go pending -> running, and a machine's node is a worker
// process of this executable (LocalWorker) that the node starter boots with the events of a cloud
// node. Faults (preempt, lose, freeze at a time; lose after n calls; a failing or slow bootstrap)
// come from the program's sky::Simulated and from SKY_SIMULATED (JSON).
#include <string>
#include <string_view>
#include <vector>

#include "sky/providers.hpp"

namespace sky::detail {

/// The environment variable whose JSON adds capacity errors and faults to every simulated pool:
/// {"capacity_errors":2,"seed":42,"faults":[{"kind":"preempt","node":1,"after_ms":3000,
///  "notice_ms":2000},
///  {"kind":"lose_after_calls","node":0,"calls":5},{"kind":"fail_bootstrap","node":2,
///  "message":"..."},{"kind":"slow_bootstrap","node":3,"delay_ms":2000}]}
inline constexpr const char* simulated_env = "SKY_SIMULATED";

/// `base` with SKY_SIMULATED's JSON merged in (`json`; null: read the environment):
/// capacity_errors and seed replace the program's when given, faults are added after the
/// program's. Throws ConfigError naming what is wrong with the JSON.
Simulated with_simulated_env(const Simulated& base, const char* json = nullptr);

/// One message per problem of a simulated cloud for a pool of `nodes` nodes (faults that name
/// no node of the pool, negative times or counts).
void check_simulated(const Simulated& config, int nodes, std::vector<std::string>& problems);

/// "preempt", "lose", "lose_after_calls", "fail_bootstrap", "slow_bootstrap", "freeze".
std::string_view fault_kind_name(Fault::Kind kind) noexcept;

}  // namespace sky::detail
