#pragma once
// Running a helper program on this machine (sbatch, ssh-keygen, nvidia-smi, a Local node's pip
// install) with a bounded wait and bounded output: the one place that forks, pipes and reaps for
// sky's commands that run to their end. Long-lived workers whose descriptors the pool drives
// are started by runtime/spawner.hpp instead.
#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace sky::detail {

/// What a helper program did.
struct SubprocessResult {
    /// Its exit status; 128 + the signal's number when a signal ended it; -1 when it could not
    /// be started, or did not end within a second of being killed (`errors` says which).
    int status = -1;
    std::string output;      ///< what it wrote to stdout (at most output_cap bytes)
    std::string errors;      ///< what it wrote to stderr (at most output_cap bytes)
    bool timed_out = false;  ///< it ran past the timeout and was killed (with its group)
    bool cancelled = false;  ///< `cancel` turned true and it was killed (with its group)
    bool truncated = false;  ///< it wrote more than output_cap bytes to one stream
};

/// How to run a helper program, beyond its argv.
struct SubprocessOptions {
    /// "NAME=value" entries: they replace or add to this process's environment, or are the
    /// whole environment when `inherit_env` is false (to leave credentials out, say).
    std::vector<std::string> env;
    bool inherit_env = true;
    /// Then the whole group is killed and `timed_out` set.
    std::chrono::milliseconds timeout{std::chrono::seconds(30)};
    std::size_t output_cap = 4u << 20;  ///< per stream; what is beyond is read and dropped
    std::string_view stdin_data;        ///< written to its stdin, then end of file
    bool merge_stderr = false;          ///< stderr goes into `output`, interleaved as written
    /// Polled at least every 100 ms: when it reads true, the group is killed, `cancelled` set.
    const std::atomic<bool>* cancel = nullptr;
    /// Sees each line of stdout as it comes, without its newline (a line longer than 64 KiB
    /// in pieces of that size); on the caller's thread.
    std::function<void(std::string_view)> on_line;
};

/// Runs argv (argv[0] looked up in PATH) in a process group of its own, as `options` say. Waits
/// at most `options.timeout` (plus a second to reap what it killed: a process stuck in the
/// kernel is then left behind rather than hanging the caller). Returns at the program's own
/// exit, also when something it started still holds its output open. Never throws for the
/// program's failures; throws sky::Error only for an empty argv.
SubprocessResult run_subprocess(const std::vector<std::string>& argv,
                                const SubprocessOptions& options);

/// run_subprocess with this process's environment plus `env`, the timeout, output cap and
/// stdin data given.
inline SubprocessResult run_subprocess(const std::vector<std::string>& argv,
                                       const std::vector<std::string>& env,
                                       std::chrono::milliseconds timeout,
                                       std::size_t output_cap = 4u << 20,
                                       std::string_view stdin_data = {}) {
    SubprocessOptions o;
    o.env = env;
    o.timeout = timeout;
    o.output_cap = output_cap;
    o.stdin_data = stdin_data;
    return run_subprocess(argv, o);
}

}  // namespace sky::detail
