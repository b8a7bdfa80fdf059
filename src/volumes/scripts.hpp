#pragma once
// The volume phase's shell (src/volumes/*.sh, embedded at build time).
#include <string_view>

namespace sky::detail::scripts {

/// mount.sh: mounts the volumes the variables before it name (plan_volumes).
std::string_view mount_sh();
/// unmount.sh: undoes what mount.sh did.
std::string_view unmount_sh();

}  // namespace sky::detail::scripts
