#pragma once
// Where sky runs Slurm's commands: the cluster's login node over one SSH session (sky::Slurm's
// `.login`), or this machine when it is a login node itself. Everything the Slurm backend and
// `sky gc` do on the cluster goes through that node's shell (node/shell.hpp): commands, small
// files, the program's store, and the byte stream to a worker on a compute node.
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "node/shell.hpp"
#include "sky/events.hpp"

namespace sky::detail::slurm {

/// How to reach the login node.
struct LoginOptions {
    std::string login;  ///< "user@host[:port]"; empty: this machine
    std::string identity_file;
    std::string known_hosts;
    std::chrono::milliseconds connect_timeout{15000};
    int connect_attempts = 3;
};

/// Connects (over SSH: host key pinned by known_hosts, no trust on first use) and learns the
/// home and user there. Over SSH a lost connection later throws ssh::SshError from the shell's
/// commands; open_channel() throws node::ChannelRefused when nothing listens at the worker's
/// port. Throws ssh::SshError (unreachable, refused key, wrong host key) or sky::ConfigError (a
/// malformed login).
std::unique_ptr<node::NodeShell> open_login(const LoginOptions& options);

/// Puts this program and its libraries into the store on the login node (~/.sky/prog/<id>,
/// each file sent once) and returns the program's directory there. `run_dir` is a private
/// directory of the pool there. Emits BootstrapProgress for `event_id`. Throws
/// ship::ShipFailure or sky::Error (the caller names the phase).
std::string ship_program(node::NodeShell& login, const std::string& event_id,
                         const std::string& run_dir, const std::function<void(Event)>& emit);

}  // namespace sky::detail::slurm
