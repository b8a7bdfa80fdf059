#pragma once
// The shell scripts that run on a Slurm cluster's nodes and login node (scripts/*.sh, embedded
// at build time: an installed libsky needs no script files).
#include <string_view>

namespace sky::detail::slurm {

/// The text of scripts/<name> (for example "unpack.sh"); throws std::logic_error for a name that
/// is not embedded (a build defect).
std::string_view node_script(std::string_view name);

}  // namespace sky::detail::slurm
