#pragma once
// Running a helper program on this machine (sbatch, ssh-keygen, a probe) with a bounded wait and
// bounded output: the one place that forks, pipes and reaps for sky's short-lived commands.
#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace sky::detail {

/// What a helper program did.
struct SubprocessResult {
    /// Its exit status; 128 + the signal's number when a signal ended it; -1 when it could not
    /// be started (`errors` says why).
    int status = -1;
    std::string output;      ///< what it wrote to stdout (at most output_cap bytes)
    std::string errors;      ///< what it wrote to stderr (at most output_cap bytes)
    bool timed_out = false;  ///< it ran past the timeout and was killed (with its group)
    bool truncated = false;  ///< it wrote more than output_cap bytes to one stream
};

/// Runs argv (argv[0] looked up in PATH) in a process group of its own, with this process's
/// environment plus `env` ("NAME=value" entries, which replace variables of the same name), and
/// `stdin_data` on its stdin (then end of file). Waits at most `timeout`: then the whole group
/// is killed and `timed_out` set. Never throws for the program's failures; throws sky::Error
/// only for an empty argv.
SubprocessResult run_subprocess(const std::vector<std::string>& argv,
                                const std::vector<std::string>& env,
                                std::chrono::milliseconds timeout,
                                std::size_t output_cap = 4u << 20,
                                std::string_view stdin_data = {});

}  // namespace sky::detail
