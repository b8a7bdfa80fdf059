#pragma once
// The shell that runs on a remote node for RemoteNode (*.sh here, embedded at build time by
// sky_embed_scripts: an installed libsky needs no script files).
#include <string_view>

namespace sky::detail::scripts {

/// admit_peers.sh: admits the pool's addresses through the node's host firewall.
std::string_view admit_peers_sh();

}  // namespace sky::detail::scripts
