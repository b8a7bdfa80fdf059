#pragma once
// The launcher: the process that starts, watches and ends a node's worker, the program itself
// started with `--sky-launch` (a process mode beside --sky-worker and --sky-serve-files). Every
// provider's bring-up (providers/remote/bring_up.hpp) runs this one argv through the node's
// shell, its settings and the pool's token on stdin, never on a command line:
//
//   PROGRAM --sky-launch            reads LaunchSettings from stdin; ends a launcher recorded in
//                                   the run directory before it (and its worker), only while
//                                   they are the processes that recorded themselves; writes the
//                                   token (0600),
//                                   heartbeat, port, exit and crash files in the run directory;
//                                   starts `PROGRAM --sky-worker` in a process group of its own;
//                                   prints the port mark (runtime/node_marks.hpp) the moment the
//                                   worker listens (the worker tells it through a pipe: no
//                                   polling), and the exit mark when it ended. Detached (the
//                                   default), it returns once the worker listens and goes on
//                                   watching in a session of its own; else (a job step) it stays in
//                                   the foreground until the worker ended and exits with its
//                                   status.
//   PROGRAM --sky-launch stop RUN [--remove [DIR...]]
//                                   ends the launcher recorded in RUN (and its worker's group),
//                                   only while they are the processes that recorded themselves;
//                                   --remove: then unmounts the volumes and removes RUN (and DIRs).
//   PROGRAM --sky-launch status RUN why the worker ended: "preempted", its exit status, or
//                                   "running"; then its sanitizer report's first lines, and its
//                                   crash report after launch_crash_marker.
//
// It is the node's one watchdog: one policy, the pool's. A client silent for idle_timeout (the
// heartbeat file's age) or the hard timeout passed: the worker's group is ended (TERM, then
// KILL), the volumes unmounted, the run directory removed and, where told, the machine powered
// off. A notice from the provider (the preemption probe answered, or the batch system's notice
// signal came): written to the run directory's `notice` file, which the worker forwards to its
// client (api.md §10a); the worker goes on, and at a firm notice's deadline (the probe's
// `reclaim`) it is ended and a `preempted` file stays.
#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sky::detail {

/// The command-line flag of the launcher's process mode.
inline constexpr const char* launch_flag = "--sky-launch";

/// Separates the status (and sanitizer lines) from the crash report in `status`'s output.
inline constexpr std::string_view launch_crash_marker = "@@sky-crash-report@@";

/// How many lines of a sanitizer report `status` prints.
inline constexpr int launch_sanitizer_lines = 16;

/// What a launcher is told (on its stdin, as to_text() writes it).
struct LaunchSettings {
    std::string token;    ///< the pool's token: into RUN/token (0600), which the worker removes
    std::string run_dir;  ///< the node's private (0700) run directory; made when missing
    /// The image's environment file (env.sh, shell): what sourcing it exports goes to the
    /// worker's environment. Empty or missing: none.
    std::string image_env;
    std::string lib_dir;  ///< prepended to the worker's LD_LIBRARY_PATH (the shipped libraries)
    /// The pool's environment (PoolSpec::env), after the image's.
    std::vector<std::pair<std::string, std::string>> env;
    std::string listen;  ///< the worker's SKY_WORKER_LISTEN: "unix:PATH" or "HOST:0"
    /// The variable whose value (an address) is the one peer the worker accepts; empty: any.
    std::string allow_from_variable;
    long long accept_timeout_s = 600;  ///< the worker's wait for its client's first connection
    long long idle_timeout_s = 0;      ///< 0: none
    long long hard_timeout_s = 0;      ///< from the launcher's start; 0: none
    bool power_off = false;            ///< on expiry, where /etc/sky/power-off-on-expiry exists
    /// The preemption probe, run every probe_period_s until a firm notice stands: exit status
    /// 0 is a notice, its first line `reclaim SECONDS REASON` (the machine goes at SECONDS since
    /// the epoch), `warn SECONDS REASON` (it may go, at SECONDS at the earliest) or anything else
    /// (it goes now) (runtime/preemption.hpp, parse_probe_output).
    std::vector<std::string> probe;
    long long probe_period_s = 5;
    /// A signal the batch system sends the step ahead of its end (Slurm's --signal): a notice
    /// whose deadline, notice_lead_s after it came, is the earliest the step may end (the batch
    /// system ends it; the launcher ends nothing early). The worker's processes start with it
    /// ignored. 0: none.
    int notice_signal = 0;
    long long notice_lead_s = 0;
    std::string notice_reason;  ///< the notice's words for that signal
    /// Run when the worker ended idle, unless another launcher claimed `current_file` within
    /// superseded_grace_s (then the superseded mark with its id is printed, not the idle mark).
    std::vector<std::string> release_on_idle;
    std::string current_file;
    long long superseded_grace_s = 30;
    /// The volumes' unmount script (bash), run when the node's life ends; empty: none.
    std::string unmount_script;
    bool detach = true;  ///< false: stay in the foreground (a Slurm step)
    /// Remove the run directory whenever the worker ended (a Slurm step's own directory);
    /// false: only on expiry (the client is gone), so that `status` can answer after a crash.
    bool remove_run_dir_at_end = false;
    /// The worker seals its stream (SKY_WORKER_SEAL, runtime/auth.hpp): `token` is then the
    /// client's public key, and the port line carries the worker's.
    bool seal = false;

    /// One "name value" line per setting (values escaped: "\\" and "\n"); env and argv words
    /// repeat their line.
    [[nodiscard]] std::string to_text() const;
    /// Throws sky::ConfigError naming the line (never a value) when `text` is malformed.
    static LaunchSettings parse(std::string_view text);
};

/// The launcher's process mode: `argv` as the program got it (argv[1] is launch_flag). Returns
/// the exit status.
int launch_main(int argc, char** argv);

}  // namespace sky::detail
