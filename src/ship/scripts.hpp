#pragma once
// The shipping commands' shell (src/ship/scripts/*.sh, embedded at build time): each runs as its
// values (node/scripts.hpp's ScriptValues), then prelude.sh, then its steps.
#include <string_view>

namespace sky::detail::scripts {

/// prelude.sh: a private umask, the store's directories ($cas), `sky_sha` (SHA-256 of stdin).
std::string_view prelude_sh();
/// inventory.sh: what the store lacks, and what the node's own system has
/// (node_scripts::inventory).
std::string_view inventory_sh();
/// store_upload.sh: an uploaded file enters the store only when its bytes hash to its name.
std::string_view store_upload_sh();
/// serve.sh: starts the peer file server and prints its port.
std::string_view serve_sh();
/// fetch.sh: files from a peer's file server into the store, each checked against its hash.
std::string_view fetch_sh();
/// compose.sh: the program directory as links into the store, renamed into place whole.
std::string_view compose_sh();

}  // namespace sky::detail::scripts
