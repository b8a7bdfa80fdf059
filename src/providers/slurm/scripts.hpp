#pragma once
// The shell scripts that run on a Slurm cluster's nodes and login node (scripts/*.sh, embedded
// at build time by sky_embed_scripts: an installed libsky needs no script files).
#include <string_view>

namespace sky::detail::scripts {

/// scripts/incoming.sh: makes the pool's private directory on a compute node for sbcast.
std::string_view incoming_sh();
/// scripts/unpack.sh: checks the broadcast archive (owner, hash of a private copy), unpacks it.
std::string_view unpack_sh();
/// scripts/probe.sh: a compute node's facts (name, architecture, C library, home, the store).
std::string_view probe_sh();
/// scripts/step.sh: starts a worker's step detached from the login node, waits for its port.
std::string_view step_sh();
/// scripts/watchdog.sh: the login node's watchdog of the client's connection, and its stop.
std::string_view watchdog_sh();

}  // namespace sky::detail::scripts
