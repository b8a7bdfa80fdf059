#pragma once
/// \file The typed errors sky throws (docs/api.md §3). No message ever contains a credential.
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "sky/export.hpp"

SKY_PUBLIC_BEGIN

/// Base of every error sky throws (the event of docs/api.md §9 is sky::ErrorEvent).
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

/// One frame of a crashed worker's stack (NodeLostError::stack()), symbolized on the client from
/// its own copy of the program.
struct StackFrame {
    std::string function;  ///< demangled name; "<module>+0x<offset>" where unknown
    std::string file;      ///< source file; empty without debug information
    int line = 0;          ///< source line; 0 without debug information
    /// Where the frame's code lies in this (the client's) process; for a module this process
    /// has not loaded, the offset in that module.
    std::uintptr_t address = 0;
};

/// A node went away while a call ran on it.
class NodeLostError : public Error {
public:
    /// Why a node was lost.
    enum class Reason { preempted, unreachable, worker_crashed };
    /// What is known of the lost call beyond its node.
    struct Call {
        std::string function;                 ///< the call's function ("" when unknown)
        bool started = false;                 ///< see started()
        int signal = 0;                       ///< see signal()
        std::vector<StackFrame> stack;        ///< see stack()
        std::vector<std::string> remote_log;  ///< see remote_log()
        /// The worker crashed in another call it ran at the same time (the stack is that one's).
        bool crashed_elsewhere = false;
    };
    NodeLostError(int node, std::string instance_id, Reason reason, std::string detail);
    /// With what the pool knows of the call; what() shows the signal, the top frames and the
    /// last lines.
    NodeLostError(int node, std::string instance_id, Reason reason, std::string detail, Call call);
    [[nodiscard]] int node() const noexcept { return node_; }
    [[nodiscard]] const std::string& instance_id() const noexcept { return instance_id_; }
    [[nodiscard]] Reason reason() const noexcept { return reason_; }
    /// Whether the worker had begun running the call. For a call with .at_most_once(), true
    /// also when the node was lost between the worker's "started" and the function's first
    /// instruction: it may have run. For other calls exact, except when a machine vanished (or
    /// its worker was killed with SIGKILL) before its "started" message left it, which it does
    /// within a millisecond of the start: then false although it may have run.
    [[nodiscard]] bool started() const noexcept { return call_.started; }
    /// The signal that killed the worker (SIGSEGV, SIGABRT, ...); 0 when none did.
    [[nodiscard]] int signal() const noexcept { return call_.signal; }
    /// The crashing thread's stack, innermost first; empty when the worker did not crash or
    /// could not say where.
    [[nodiscard]] const std::vector<StackFrame>& stack() const noexcept { return call_.stack; }
    /// The last lines the call printed (stdout and stderr), oldest first.
    [[nodiscard]] const std::vector<std::string>& remote_log() const noexcept {
        return call_.remote_log;
    }
    /// "preempted", "unreachable" or "worker crashed".
    [[nodiscard]] static const char* reason_name(Reason r) noexcept;

private:
    int node_;
    std::string instance_id_;
    Reason reason_;
    Call call_;
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

/// resize() or drain() would remove a node of the frozen world of distributed calls (a world
/// cannot change once formed): thrown by that call; pool.release_world() forgets the world.
class NotResizableError : public ConfigError {
public:
    using ConfigError::ConfigError;
};

/// The pool reached PoolSpec::budget's max_total_usd: it launches nothing more, its nodes are
/// ended, and every waiting, running and later call fails with this.
class BudgetExceededError : public Error {
public:
    BudgetExceededError(const std::string& what, double spent, double limit)
        : Error(what), spent_(spent), limit_(limit) {}
    /// The projected spend at the stop, in US dollars.
    [[nodiscard]] double spent() const noexcept { return spent_; }
    /// max_total_usd.
    [[nodiscard]] double limit() const noexcept { return limit_; }

private:
    double spent_;
    double limit_;
};

SKY_PUBLIC_END
