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

/// `sky ls --provider aws [--region R] [--all]`: the instances sky launched (tag sky:pool), as a
/// table; never prints a credential. Returns 0, 1 on a provider error, 2 on a usage error.
int ls_command(const std::vector<std::string>& args);

}  // namespace sky::cli
