#include "providers/slurm/jobs.hpp"

#include <algorithm>
#include <string>
#include <thread>

#include "providers/slurm/scripts.hpp"
#include "util/shell.hpp"

namespace sky::detail::slurm {

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kQueryLimit = std::chrono::seconds(60);

bool live(const JobState& j) { return j.phase != JobPhase::ended; }

// squeue's answer, or an exception when it gave none (the controller did not answer): an
// unanswered question must never read as "the job is gone".
node::CommandOutcome squeue(node::NodeShell& login, const std::vector<std::string>& argv) {
    auto r = login.run(argv, kQueryLimit);
    if (r.status != 0 && r.err.find("Invalid job id") == std::string::npos)
        throw Error("slurm: squeue failed on " + login.describe() + ": " + r.summary());
    return r;
}

}  // namespace

std::optional<JobState> query_job(node::NodeShell& login, const std::string& job_id) {
    for (auto& j : parse_squeue(squeue(login, squeue_argv({job_id})).out))
        if (j.id == job_id) return j;
    // squeue forgets a job some minutes after it ended (MinJobAge); sacct remembers where the
    // cluster keeps accounting.
    auto a = login.run(sacct_argv({job_id}), kQueryLimit);
    for (auto& j : parse_sacct(a.out))
        if (j.id == job_id) return j;
    return std::nullopt;
}

std::vector<JobState> query_by_name(node::NodeShell& login, const std::string& job_name) {
    auto argv = squeue_user_argv({job_name});
    argv.push_back("--user=" + login.user());
    argv.push_back("--states=all");
    std::vector<JobState> out;
    for (auto& j : parse_squeue(squeue(login, argv).out))
        if (j.name == job_name) out.push_back(std::move(j));
    return out;
}

std::string pool_of_job_name(std::string_view job_name) {
    if (job_name.rfind("sky-", 0) != 0) return {};
    const std::string_view id = job_name.substr(4);
    const bool hex = std::all_of(id.begin(), id.end(), [](char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
    });
    return hex && id.size() >= 8 && id.size() <= 32 ? std::string(id) : std::string();
}

std::vector<JobState> query_sky_jobs(node::NodeShell& login) {
    auto argv = squeue_user_argv();
    argv.push_back("--user=" + login.user());
    std::vector<JobState> out;
    for (auto& j : parse_squeue(squeue(login, argv).out))
        if (!pool_of_job_name(j.name).empty()) out.push_back(std::move(j));
    return out;
}

std::string cancel_job(node::NodeShell& login, const std::string& job_id,
                       const std::string& job_name) {
    auto r = login.run(
        job_id.empty() ? scancel_name_argv(job_name, login.user()) : scancel_argv({job_id}),
        kQueryLimit);
    // A job that already ended is not an error ("Job/step already completing or completed",
    // "Invalid job id specified" once it is forgotten).
    if (r.status == 0 || r.err.find("already complet") != std::string::npos ||
        r.err.find("Invalid job id") != std::string::npos)
        return {};
    return "scancel on " + login.describe() + " failed: " + r.summary();
}

std::string pool_dir(const node::NodeShell& login, const std::string& pool_id) {
    return login.home() + "/.sky/slurm/" + pool_id;
}

void remove_pool_files(node::NodeShell& login, const std::string& pool_id) {
    if (pool_id.empty() || pool_id.find('/') != std::string::npos) return;
    // The watchdog is signalled only while it is the process that recorded itself (its start
    // time and command line): a pid the kernel gave to another process since is left alone.
    const std::string dir = pool_dir(login, pool_id);
    login.script(shell_command({"bash", "-c", std::string(scripts::watchdog_sh()),
                                "sky-watchdog", "stop", dir}) +
                     "; rm -rf -- " + shell_quote(dir),
                 kQueryLimit);
}

std::optional<JobState> wait_gone(node::NodeShell& login, const std::string& job_id,
                                  const std::string& job_name, std::chrono::seconds limit,
                                  const std::function<bool()>& give_up) {
    const auto until = Clock::now() + limit;
    auto delay = std::chrono::milliseconds(200);
    for (;;) {
        std::optional<JobState> still;
        if (!job_id.empty()) {
            if (auto j = query_job(login, job_id); j && live(*j)) still = j;
        } else {
            for (auto& j : query_by_name(login, job_name))
                if (live(j)) still = j;
        }
        if (!still || Clock::now() >= until || (give_up && give_up())) return still;
        std::this_thread::sleep_for(delay);
        delay = std::min(delay * 2, std::chrono::milliseconds(2000));
    }
}

}  // namespace sky::detail::slurm
