#pragma once
// The shell that runs in sky's pods (scripts/*.sh, embedded at build time by sky_embed_scripts).
#include <string_view>

namespace sky::detail::scripts {

/// scripts/pod_main.sh: a pod's main process; holds the pod until the pool's client is gone.
std::string_view pod_main_sh();
/// scripts/home.sh: the pod's user and the home sky keeps its files in.
std::string_view home_sh();

}  // namespace sky::detail::scripts
