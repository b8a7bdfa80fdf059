#pragma once
// The shell that runs on an AWS node (*.sh here, embedded at build time by sky_embed_scripts: an
// installed libsky needs no script files).
#include <string_view>

namespace sky::detail::scripts {

/// spot_probe.sh: the spot node's preemption probe (IMDSv2 spot/instance-action and the
/// rebalance recommendation), in the launcher's probe contract.
std::string_view spot_probe_sh();

}  // namespace sky::detail::scripts
