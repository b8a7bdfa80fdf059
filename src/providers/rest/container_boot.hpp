#pragma once
// The first-boot script of a container cloud's node (Vast.ai, RunPod): the container's image may
// have no sshd and no init to start it, so this script installs OpenSSH when it is missing,
// authorizes the pool's client key for root, runs the cloud layer's boot script (kept verbatim in
// a quoted here-document, so the pinned host key is where every reader of a boot script looks), and
// leaves an sshd serving that host key running: a running one is told to reload, else one is
// started.
#include <string>

namespace sky::detail {

/// The script, for a container's start command or onstart hook. It runs under umask 077: the
/// copy of the boot script it writes (with the node's host key) is its owner's alone, and gone
/// once run.
std::string container_boot_script(const std::string& boot_script,
                                  const std::string& authorized_key);

/// A container's start command (its argument list) that runs the script held in the
/// environment variable `variable` and then keeps the container alive: the script reaches bash
/// through a pipe (no copy on disk), runs without that variable, and the process that stays
/// (PID 1) is exec'd without it, so no process of the container keeps the script in its
/// environment.
std::string container_start_command(const std::string& variable);

}  // namespace sky::detail
