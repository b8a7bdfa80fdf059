#include "sky/errors.hpp"

#include <fmt/format.h>

namespace sky {

namespace {
std::string remote_what(const std::string& function, int node, const std::string& type_name,
                        const std::string& message) {
    return fmt::format("{} on node {} threw {}: {}", function, node, type_name, message);
}
std::string attempts_what(const std::string& message, const std::vector<ProvisionAttempt>& a) {
    std::string s = message;
    for (auto& x : a)
        s += fmt::format("\n  - {} {}{}{}: {}", x.provider, x.instance_type,
                         x.region.empty() ? "" : " in " + x.region, x.spot ? " (spot)" : "",
                         x.error);
    return s;
}
}  // namespace

RemoteError::RemoteError(std::string function, int node, std::string instance_id,
                         std::string type_name, std::string message,
                         std::vector<std::string> remote_log)
    : Error(remote_what(function, node, type_name, message)),
      function_(std::move(function)),
      node_(node),
      instance_id_(std::move(instance_id)),
      type_name_(std::move(type_name)),
      message_(std::move(message)),
      remote_log_(std::move(remote_log)) {}

ProvisionError::ProvisionError(const std::string& message, std::vector<ProvisionAttempt> attempts)
    : Error(attempts_what(message, attempts)), attempts_(std::move(attempts)) {}

BootstrapError::BootstrapError(int node, std::string instance_id, std::string phase,
                               std::string message, std::vector<std::string> output)
    : Error(fmt::format("bootstrap of node {} ({}) failed in phase '{}': {}", node, instance_id,
                        phase, message)),
      node_(node),
      instance_id_(std::move(instance_id)),
      phase_(std::move(phase)),
      output_(std::move(output)) {}

NodeLostError::NodeLostError(int node, std::string instance_id, Reason reason, std::string detail)
    : Error(fmt::format("node {} ({}) lost: {}{}{}", node, instance_id, reason_name(reason),
                        detail.empty() ? "" : ": ", detail)),
      node_(node),
      instance_id_(std::move(instance_id)),
      reason_(reason) {}

const char* NodeLostError::reason_name(Reason r) noexcept {
    switch (r) {
        case Reason::preempted:
            return "preempted";
        case Reason::unreachable:
            return "unreachable";
        case Reason::worker_crashed:
            return "worker crashed";
    }
    return "lost";
}

}  // namespace sky
