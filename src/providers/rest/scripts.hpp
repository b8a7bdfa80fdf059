#pragma once
// A container cloud node's first boot (src/providers/rest/scripts/*.sh, embedded at build time).
#include <string_view>

namespace sky::detail::scripts {

/// container_boot.sh: sshd (installed when missing), the client's key, the pool's boot script
/// (in `sky_boot`), then an sshd serving its host key.
std::string_view container_boot_sh();

}  // namespace sky::detail::scripts
