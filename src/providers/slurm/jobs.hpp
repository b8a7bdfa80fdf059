#pragma once
// Asking a cluster about sky's jobs and ending them: what the pool's backend and `sky gc` /
// `sky ls` share. Every call is bounded in time.
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "providers/slurm/login.hpp"
#include "providers/slurm/slurm_commands.hpp"

namespace sky::detail::slurm {

/// The job as squeue shows it, else as sacct remembers it (a job squeue has forgotten); none
/// when the cluster knows no such job.
std::optional<JobState> query_job(node::NodeShell& login, const std::string& job_id);

/// The calling user's jobs with this name (every state squeue still shows).
std::vector<JobState> query_by_name(node::NodeShell& login, const std::string& job_name);

/// The pool of a job named as sky names its jobs, "sky-<pool id>" (a pool id is 8 to 32
/// lowercase hex digits); "" for any other name: a job its user named "sky-notebook" is never
/// taken for a pool's (`sky gc --include-unknown` would cancel it).
[[nodiscard]] std::string pool_of_job_name(std::string_view job_name);

/// Every job of the calling user named as a pool's job (pool_of_job_name; sky ls).
std::vector<JobState> query_sky_jobs(node::NodeShell& login);

/// Asks Slurm to end the job (by id; by name when the id is empty, for a submission whose id
/// was never seen). Returns scancel's failure, empty on success.
std::string cancel_job(node::NodeShell& login, const std::string& job_id,
                       const std::string& job_name);

/// The pool's private directory on the login node: its srun outputs, its watchdog's files.
std::string pool_dir(const node::NodeShell& login, const std::string& pool_id);

/// Ends the pool's watchdog on the login node and removes the pool's directory there. Never
/// throws for the command's failure (a lost connection throws ssh::SshError).
void remove_pool_files(node::NodeShell& login, const std::string& pool_id);

/// Waits (polling, at most `limit`) until the job has ended or the cluster forgets it; returns
/// its last state when it did not (still completing: its processes are not dead yet).
std::optional<JobState> wait_gone(node::NodeShell& login, const std::string& job_id,
                                  const std::string& job_name, std::chrono::seconds limit,
                                  const std::function<bool()>& give_up = {});

}  // namespace sky::detail::slurm
