#include "sky/errors.hpp"

#include <fmt/format.h>

#include <cstring>
#include <string_view>

namespace sky::inline v0 {

namespace {
// Text that came from a worker (its exception's message, its output, a crash's names) as
// what() shows it: control characters other than line breaks and tabs, and C1 controls, as
// \xNN / \uNNNN, so that a program that prints e.what() cannot be made to drive its
// terminal. The accessors keep the bytes as they came.
std::string shown(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
        const auto c = static_cast<unsigned char>(s[i]);
        const auto next = i + 1 < s.size() ? static_cast<unsigned char>(s[i + 1]) : 0;
        if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
            out += fmt::format("\\x{:02x}", c);
        } else if (c == 0xc2 && next >= 0x80 && next <= 0x9f) {
            out += fmt::format("\\u{:04x}", next);
            ++i;
        } else {
            out += static_cast<char>(c);
        }
    }
    return out;
}

std::string remote_what(const std::string& function, int node, const std::string& type_name,
                        const std::string& message) {
    return fmt::format("{} on node {} threw {}: {}", shown(function), node, shown(type_name),
                       shown(message));
}
std::string attempts_what(const std::string& message, const std::vector<ProvisionAttempt>& a) {
    std::string s = message;
    for (auto& x : a)
        s += fmt::format("\n  - {} {}{}{}: {}", x.provider, x.instance_type,
                         x.region.empty() ? "" : " in " + x.region, x.spot ? " (spot)" : "",
                         x.error);
    return s;
}
// What a user reads first about a crash: the signal, where (the top frames), what it printed.
constexpr std::size_t shown_frames = 8;
constexpr std::size_t shown_lines = 10;

std::string lost_what(int node, const std::string& instance_id, NodeLostError::Reason reason,
                      const std::string& detail, const NodeLostError::Call& c) {
    std::string s =
        fmt::format("node {} ({}) lost: {}{}{}", node, instance_id,
                    NodeLostError::reason_name(reason), detail.empty() ? "" : ": ", shown(detail));
    if (c.signal > 0) {
        const char* abbrev = ::sigabbrev_np(c.signal);
        s += fmt::format("\n  {}{} (signal {})", abbrev ? "SIG" : "", abbrev ? abbrev : "signal",
                         c.signal);
        if (c.crashed_elsewhere)
            s += " in another call the worker ran at the same time";
        else if (!c.function.empty())
            s += " while running " + shown(c.function);
        if (!c.stack.empty()) s += ", innermost frame first:";
        for (std::size_t i = 0; i < c.stack.size() && i < shown_frames; ++i) {
            const auto& f = c.stack[i];
            s += fmt::format("\n    #{} {}", i, f.function.empty() ? "??" : shown(f.function));
            if (!f.file.empty()) s += fmt::format(" at {}:{}", shown(f.file), f.line);
        }
        if (c.stack.size() > shown_frames)
            s += fmt::format("\n    ... {} more", c.stack.size() - shown_frames);
    }
    if (!c.remote_log.empty()) {
        s += c.function.empty() ? std::string("\n  last output:")
                                : fmt::format("\n  last output of {}:", shown(c.function));
        const std::size_t from =
            c.remote_log.size() > shown_lines ? c.remote_log.size() - shown_lines : 0;
        for (std::size_t i = from; i < c.remote_log.size(); ++i)
            s += "\n    " + shown(c.remote_log[i]);
    }
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
    : NodeLostError(node, std::move(instance_id), reason, std::move(detail), Call{}) {}

NodeLostError::NodeLostError(int node, std::string instance_id, Reason reason, std::string detail,
                             Call call)
    : Error(lost_what(node, instance_id, reason, detail, call)),
      node_(node),
      instance_id_(std::move(instance_id)),
      reason_(reason),
      call_(std::move(call)) {}

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

}  // namespace sky::inline v0
