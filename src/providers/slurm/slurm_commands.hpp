#pragma once
// What sky says to Slurm and how it reads the answers: the command lines of sbatch, squeue,
// sacct, scancel, sinfo, scontrol and srun, and parsers of their output. Pure functions, no I/O:
// the backend runs these argv on the login node (or here), the unit tests check them.
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "node/shell.hpp"
#include "sky/accelerator.hpp"
#include "sky/errors.hpp"

namespace sky::detail::slurm {

/// Where a job is in its life, from the state squeue or sacct prints.
enum class JobPhase {
    pending,     ///< PD, CF (nodes booting), RQ/RH/RF/RD (requeued or held): no nodes to use yet
    running,     ///< R: steps can start
    suspended,   ///< S, ST: its processes are stopped
    completing,  ///< CG, SI, SO: ending, its processes are being killed
    ended,       ///< CD, CA, F, TO, NF, PR, BF, DL, OOM, RV, SE: gone for good
    unknown,     ///< a state this build does not know
};

/// One job as squeue or sacct describe it.
struct JobState {
    std::string id;     ///< "12"
    std::string name;   ///< the job name (squeue only)
    std::string state;  ///< the long name: "PENDING", "CANCELLED", ...
    JobPhase phase = JobPhase::unknown;
    std::string reason;        ///< Slurm's reason ("Resources", "None", ...)
    std::string nodes;         ///< node list expression ("c[0-1]"); empty while pending
    std::string exit_code;     ///< sacct's "0:15" (status:signal); empty from squeue
    std::string cancelled_by;  ///< sacct's uid after "CANCELLED by"; empty otherwise
};

/// The long state name for a short code or a long name ("PD" and "PENDING" give "PENDING");
/// upper-cased input that matches neither is returned as it is.
std::string long_state(std::string_view code_or_name);
/// The phase of a state (short code or long name).
JobPhase phase_of(std::string_view state);

/// squeue for these jobs, in every state (a job that just ended is still listed for a while),
/// one line each: "id|name|state|reason|nodes".
std::vector<std::string> squeue_argv(const std::vector<std::string>& job_ids);
/// squeue for every job of the calling user whose name is in `names` (empty: all of them).
std::vector<std::string> squeue_user_argv(const std::vector<std::string>& names = {});
/// Parses squeue_argv's output; lines that do not fit are skipped.
std::vector<JobState> parse_squeue(std::string_view text);

/// sacct for these jobs (the allocation line only, parsable): for a job squeue forgot.
std::vector<std::string> sacct_argv(const std::vector<std::string>& job_ids);
/// Parses sacct_argv's output ("id|state|reason|nodes|exit code"); job steps are skipped.
std::vector<JobState> parse_sacct(std::string_view text);

/// scancel for these jobs.
std::vector<std::string> scancel_argv(const std::vector<std::string>& job_ids);
/// scancel for the calling user's jobs with this name (a submission whose id was never seen).
std::vector<std::string> scancel_name_argv(const std::string& job_name, const std::string& user);

/// What one pool's job asks for.
struct BatchRequest {
    std::string job_name;  ///< "sky-<pool id>"
    int nodes = 1;
    std::optional<std::string> gres;  ///< "gpu:h100:8", "gpu:8"
    std::chrono::seconds time_limit{3600};
    std::optional<int> min_cpus;                                   ///< per node (PoolSpec::cpu)
    std::optional<long> memory_mb;                                 ///< per node (PoolSpec::memory)
    std::string partition, account, qos, constraint, reservation;  ///< as given, when set
};
/// How long before a job's end its steps get notice_signal (sbatch --signal, without "B:": the
/// job's steps, where the node launchers are, not the batch shell): a quarter of the time limit
/// (as --time rounds it: at least 15 s), at most 120 s. Slurm checks every 30 s, so it may come up
/// to that much earlier, never later; with PreemptParameters=send_user_signal it comes at a
/// preemption too.
std::chrono::seconds notice_lead(std::chrono::seconds time_limit);
/// The signal: SIGUSR1, by the name --signal takes.
inline constexpr const char* notice_signal_name = "USR1";
/// sbatch with the request's options; the batch script comes on its stdin (batch_script()).
std::vector<std::string> sbatch_argv(const BatchRequest& request);
/// The batch script: it only holds the allocation; the workers are steps beside it.
std::string batch_script(const std::string& pool_id);
/// The job id in `sbatch --parsable` output ("12" or "12;cluster"); empty when there is none.
std::string parse_sbatch(std::string_view out);
/// A duration as Slurm's --time wants it, "D-HH:MM:SS", rounded up to whole minutes (Slurm's
/// granularity), at least one minute.
std::string format_time_limit(std::chrono::seconds limit);

/// sinfo printing the GRES of a partition's nodes (every partition when empty), one
/// configuration a line.
std::vector<std::string> sinfo_gres_argv(const std::string& partition);
/// Which --gres a pool asks for.
struct GresChoice {
    std::string gres;  ///< "gpu:h100:8" (the type as the cluster spells it) or "gpu:8"
    bool typed = false;
    std::string note;  ///< one sentence saying which and why (for an event)
};
/// The GRES for `accelerator` (count per node) from sinfo_gres_argv's output: a GPU type of the
/// partition equal to the accelerator's name ignoring case, else one whose words (split at
/// '_', '-', '.') include it, else untyped "gpu:N". Throws ProvisionError when the partition
/// declares no GPUs at all.
GresChoice choose_gres(const Accelerator& accelerator, std::string_view sinfo_output,
                       std::string_view partition);

/// Expands a Slurm host list ("c[0-1,5],gpu-[01-02]x,login") to names in order. Throws
/// sky::Error on a malformed expression.
std::vector<std::string> expand_hostlist(std::string_view list);

/// A compute node as scontrol shows it.
struct NodeInfo {
    std::string name;      ///< NodeName
    std::string address;   ///< NodeAddr (how the cluster reaches it)
    std::string hostname;  ///< NodeHostName
};
/// scontrol printing these nodes, one line each.
std::vector<std::string> scontrol_nodes_argv(const std::vector<std::string>& names);
/// Parses scontrol_nodes_argv's output.
std::vector<NodeInfo> parse_scontrol_nodes(std::string_view text);

/// srun starting `command` as a step of a running job on the named nodes, one task per node,
/// beside the batch step (--overlap), in /tmp.
std::vector<std::string> srun_argv(const std::string& job_id, const std::vector<std::string>& nodes,
                                   const std::vector<std::string>& command);
/// argv as one shell command line, each word single-quoted (the node shells' own).
using node::shell_command;
/// sbcast of a file to every node of the job (run where the file is: the login node).
std::vector<std::string> sbcast_argv(const std::string& job_id, const std::string& source,
                                     const std::string& destination);

/// Slurm's pending reason in words ("Resources" → "waiting for nodes with the requested
/// resources to become free"); the reason itself when it is not a common one.
std::string explain_reason(std::string_view reason);
/// Whether a pending reason never clears by waiting (a request the cluster's limits or
/// configuration refuse): the pool gives up at once instead of at queue_timeout.
bool reason_never_clears(std::string_view reason);

/// Why a job that is no longer running lost its nodes, for a NodeLostError:
/// "the Slurm job 12 ended: TIMEOUT (it reached its time limit)".
std::string end_words(const JobState& job);
/// How a job's end counts: preempted for PREEMPTED, else unreachable.
NodeLostError::Reason loss_kind(const JobState& job);

/// `.login` taken apart: "user@host[:port]" ("[v6]:port" for an IPv6 address).
struct LoginAddress {
    std::string user;  ///< empty: the client's own user name
    std::string host;
    int port = 22;
    /// "user@host:port" (the port always written).
    [[nodiscard]] std::string to_string() const;
};
/// Throws sky::ConfigError naming what is wrong.
LoginAddress parse_login(std::string_view login);

/// What `sky gc` needs to find one pool's job again with nothing but the ledger: how to reach
/// the login node and the job's name and id. Recorded as the ledger's instance id.
struct JobRef {
    std::string login;          ///< "user@host:port"; empty: Slurm on the machine of the pool
    std::string identity_file;  ///< the SSH key (a path, never the key)
    std::string known_hosts;    ///< the file pinning the login node's key
    std::string job_name;       ///< "sky-<pool id>"
    std::string job_id;         ///< empty: recorded before sbatch named it

    /// "slurm:<job id or *>:<job name>@<login or local>[;key=..][;known_hosts=..]" (paths
    /// percent-encoded).
    [[nodiscard]] std::string to_string() const;
    /// Parses to_string()'s form; none for anything else.
    static std::optional<JobRef> parse(std::string_view text);
};

}  // namespace sky::detail::slurm
