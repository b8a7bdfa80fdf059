#pragma once
// The `sky` tool's subcommands; each lives in its own *_command.cpp.
#include <string>
#include <vector>

namespace sky::cli {

/// `sky catalog [--accelerator NAME] [--provider NAME] [--spot] [--region R] [--cpu N]
/// [--memory M] [--limit N] [--help]`: matching offers, cheapest first. `args` excludes "catalog".
/// Returns the process exit code (0 offers shown, 1 none match, 2 usage error).
int catalog_command(const std::vector<std::string>& args);

/// `sky doctor [--offline]`: which credentials are set (never their values) and which
/// providers' endpoints answer.
int doctor_command(const std::vector<std::string>& args);

/// `sky ls [--provider NAME] [--region R] [--all]`: the ledger's live pools and the machines
/// found by sky's tag at each cloud with credentials; `--provider aws` prints EC2's table of the
/// instances tagged sky:pool. Never prints a credential. Returns 0, 1 when a provider could not
/// be asked, 2 on a usage error.
int ls_command(const std::vector<std::string>& args);

/// `sky gc [--provider NAME] [--dry-run] [--include-unknown]`: terminates what pools that are no
/// longer running left behind (never a running pool's machines) and closes their ledgers.
/// Returns 0 when nothing is left to do, 1 when something could not be ended, 2 on a usage
/// error.
int gc_command(const std::vector<std::string>& args);

}  // namespace sky::cli
