#pragma once
// A cloud node's boot and its host key rotation (src/providers/cloud/scripts/*.sh, embedded at
// build time).
#include <string_view>

namespace sky::detail::scripts {

/// boot.sh: a node's first boot (boot_script's steps).
std::string_view boot_sh();
/// rotate_host_key.sh: replaces the boot script's host key over the pinned session.
std::string_view rotate_host_key_sh();

}  // namespace sky::detail::scripts
