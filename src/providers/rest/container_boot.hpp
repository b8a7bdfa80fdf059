#pragma once
// The first-boot script of a container cloud's node (Vast.ai, RunPod): the container's image may
// have no sshd and no init to start it, so this script installs OpenSSH when it is missing,
// authorizes the pool's client key for root, runs the cloud layer's boot script (kept verbatim in
// a heredoc, so the pinned host key is where every reader of a boot script looks), and leaves an
// sshd serving that host key running: a running one is told to reload, else one is started.
#include <string>

namespace sky::detail {

/// The script, for a container's start command or onstart hook.
std::string container_boot_script(const std::string& boot_script,
                                  const std::string& authorized_key);

}  // namespace sky::detail
