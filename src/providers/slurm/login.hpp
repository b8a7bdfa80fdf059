#pragma once
// Where sky runs Slurm's commands: the cluster's login node over one SSH session (sky::Slurm's
// `.login`), or this machine when it is a login node itself. Everything the Slurm backend and
// `sky gc` do on the cluster goes through this one interface: commands, small files, the
// program's store, and the byte stream to a worker on a compute node.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "io/stream.hpp"
#include "sky/events.hpp"

namespace sky::detail::slurm {

/// A command's end: exit status (-1: killed or not started), its two streams.
struct CommandOutcome {
    int status = -1;
    std::string out;
    std::string err;
    bool timed_out = false;
    /// "exit status 1: <the last line of stderr>" for an error message.
    [[nodiscard]] std::string summary() const;
};

/// How to reach the login node.
struct LoginOptions {
    std::string login;  ///< "user@host[:port]"; empty: this machine
    std::string identity_file;
    std::string known_hosts;
    std::chrono::milliseconds connect_timeout{15000};
    int connect_attempts = 3;
};

class LoginShell {
public:
    virtual ~LoginShell() = default;
    /// Runs argv there (over SSH each word quoted for the login's shell) with `stdin_data` on
    /// its stdin. A failing command is an outcome, not an exception; a lost SSH connection
    /// throws ssh::SshError. At most `timeout`: then the outcome says timed_out.
    virtual CommandOutcome run(const std::vector<std::string>& argv,
                               std::chrono::milliseconds timeout,
                               std::string_view stdin_data = {}) = 0;
    /// Runs a bash script there (`bash -c script`).
    CommandOutcome script(const std::string& body, std::chrono::milliseconds timeout,
                          std::string_view stdin_data = {}) {
        return run({"bash", "-c", body}, timeout, stdin_data);
    }
    /// $HOME there.
    [[nodiscard]] virtual const std::string& home() const = 0;
    /// The user sky runs as there.
    [[nodiscard]] virtual const std::string& user() const = 0;
    /// A byte stream to host:port as the login node reaches it (compute nodes are reachable
    /// from there, maybe not from the client), within `timeout`. Throws ssh::ChannelError when
    /// the login node answers that nothing listens there, another sky::Error when nothing
    /// answers.
    virtual std::unique_ptr<io::Stream> open_channel(
        const std::string& host, std::uint16_t port,
        std::chrono::milliseconds timeout = std::chrono::seconds(30)) = 0;
    /// After the connection to the login node was lost: a new one (one attempt, within
    /// `within`), which later commands and channels use. True when it made one; false when the
    /// connection was alive (another caller reconnected first) or there is none to lose (this
    /// machine). Throws ssh::SshError when the login node cannot be reached, sky::Error after
    /// close().
    virtual bool reconnect(std::chrono::milliseconds within) {
        (void)within;
        return false;
    }
    /// Which connection is in use: a new number after each reconnect().
    [[nodiscard]] virtual std::uint64_t connection() const { return 0; }
    /// Ends connection `connection` when it is still the one in use: it looks alive but does
    /// not answer (half-open, after a cut that no reset announced), and the next reconnect()
    /// replaces it. Never throws.
    virtual void drop(std::uint64_t connection) noexcept { (void)connection; }
    /// Puts this program and its libraries into the store there (~/.sky/prog/<id>, each file
    /// sent once) and returns the program's directory. `run_dir` is a private directory of the
    /// pool there. Emits BootstrapProgress for `event_id`. Throws BootstrapError-free failures
    /// as sky::Error (the caller names the phase).
    virtual std::string ship_program(const std::string& event_id, const std::string& run_dir,
                                     const std::function<void(Event)>& emit) = 0;
    /// Starts argv there on a channel of the connection in use that stays open until the
    /// command ends or the connection does (its output is discarded); returns at once. The
    /// command learns that the connection is gone when its writes to stdout fail. Throws
    /// std::logic_error on this machine (no connection), ssh::SshError when it is lost.
    virtual void hold(const std::vector<std::string>& argv) {
        (void)argv;
        throw std::logic_error("slurm: no connection to hold a command on");
    }
    /// "root@10.0.0.1:22", "this machine".
    [[nodiscard]] virtual std::string describe() const = 0;
    /// False once the connection to the login node is lost.
    [[nodiscard]] virtual bool alive() const = 0;
    /// Ends the connection (idempotent). Never throws.
    virtual void close() noexcept = 0;
};

/// Connects (over SSH: host key pinned by known_hosts, no trust on first use) and learns the
/// home and user there. Throws ssh::SshError (unreachable, refused key, wrong host key) or
/// sky::ConfigError (a malformed login).
std::unique_ptr<LoginShell> open_login(const LoginOptions& options);

}  // namespace sky::detail::slurm
