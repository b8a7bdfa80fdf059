#pragma once
/// \file The typed errors sky throws (api.md §3). No message ever contains a credential.
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace sky {

/// Base of every error sky throws (the event of api.md §9 is sky::ErrorEvent).
class Error : public std::runtime_error {
public:
    explicit Error(const std::string& what) : std::runtime_error(what) {}
    explicit Error(const char* what) : std::runtime_error(what) {}
};

/// A bad option value; the message names the option and the value.
class ConfigError : public Error {
public:
    using Error::Error;
};

/// The remote function threw: rethrown on the client with what is known about it.
class RemoteError : public Error {
public:
    RemoteError(std::string function, int node, std::string instance_id, std::string type_name,
                std::string message, std::vector<std::string> remote_log);
    /// Qualified name of the registered function, e.g. "stats::mean".
    [[nodiscard]] const std::string& function() const noexcept { return function_; }
    /// Node index the call ran on.
    [[nodiscard]] int node() const noexcept { return node_; }
    [[nodiscard]] const std::string& instance_id() const noexcept { return instance_id_; }
    /// Demangled dynamic type of the original exception, e.g. "std::invalid_argument".
    [[nodiscard]] const std::string& type_name() const noexcept { return type_name_; }
    /// The original exception's what().
    [[nodiscard]] const std::string& message() const noexcept { return message_; }
    /// The last lines the call printed (stdout and stderr), oldest first.
    [[nodiscard]] const std::vector<std::string>& remote_log() const noexcept {
        return remote_log_;
    }

private:
    std::string function_;
    int node_;
    std::string instance_id_;
    std::string type_name_;
    std::string message_;
    std::vector<std::string> remote_log_;
};

/// One attempt to get capacity for an offer, as recorded by ProvisionError.
struct ProvisionAttempt {
    std::string provider;
    std::string instance_type;
    std::string region;
    bool spot = false;
    std::string error;  ///< what the provider answered
};

/// No capacity, no matching offer, quota or authentication failures.
class ProvisionError : public Error {
public:
    explicit ProvisionError(const std::string& message,
                            std::vector<ProvisionAttempt> attempts = {});
    /// Every offer tried, in order, with the provider's answer.
    [[nodiscard]] const std::vector<ProvisionAttempt>& attempts() const noexcept {
        return attempts_;
    }

private:
    std::vector<ProvisionAttempt> attempts_;
};

/// A node could not be prepared: which node, which bootstrap phase, its last output lines.
class BootstrapError : public Error {
public:
    BootstrapError(int node, std::string instance_id, std::string phase, std::string message,
                   std::vector<std::string> output = {});
    [[nodiscard]] int node() const noexcept { return node_; }
    [[nodiscard]] const std::string& instance_id() const noexcept { return instance_id_; }
    [[nodiscard]] const std::string& phase() const noexcept { return phase_; }
    [[nodiscard]] const std::vector<std::string>& output() const noexcept { return output_; }

private:
    int node_;
    std::string instance_id_;
    std::string phase_;
    std::vector<std::string> output_;
};

/// A node went away while a call ran on it.
class NodeLostError : public Error {
public:
    /// Why a node was lost.
    enum class Reason { preempted, unreachable, worker_crashed };
    NodeLostError(int node, std::string instance_id, Reason reason, std::string detail);
    [[nodiscard]] int node() const noexcept { return node_; }
    [[nodiscard]] const std::string& instance_id() const noexcept { return instance_id_; }
    [[nodiscard]] Reason reason() const noexcept { return reason_; }
    /// "preempted", "unreachable" or "worker crashed".
    [[nodiscard]] static const char* reason_name(Reason r) noexcept;

private:
    int node_;
    std::string instance_id_;
    Reason reason_;
};

/// A call or an operation ran past its deadline.
class TimeoutError : public Error {
public:
    using Error::Error;
};

/// The wire protocol saw something it cannot accept (bad magic, oversized or truncated frame).
class ProtocolError : public Error {
public:
    using Error::Error;
};

/// A call was cancelled before it produced a result.
class CancelledError : public Error {
public:
    using Error::Error;
};

}  // namespace sky
