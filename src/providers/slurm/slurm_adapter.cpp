#include "providers/slurm/slurm_adapter.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <mutex>

#include "providers/slurm/jobs.hpp"
#include "providers/slurm/login.hpp"
#include "providers/slurm/slurm_commands.hpp"
#include "util/env.hpp"

namespace sky::detail {

namespace {

using namespace slurm;

CloudInstance::State cloud_state(const JobState& j) {
    switch (j.phase) {
        case JobPhase::running:
            return CloudInstance::State::running;
        case JobPhase::completing:
            return CloudInstance::State::stopping;
        case JobPhase::ended:
            return CloudInstance::State::gone;
        default:
            return CloudInstance::State::pending;
    }
}

std::string pool_of(const std::string& job_name) { return pool_of_job_name(job_name); }

// Whether this machine has a Slurm of its own to ask (a login node): its configuration and
// squeue. A machine with Slurm's commands but no cluster would wait for a controller that
// is not there.
bool local_slurm() {
    std::error_code ec;
    const std::string conf = env_or("SLURM_CONF", "/etc/slurm/slurm.conf");
    if (!std::filesystem::exists(conf, ec)) return false;
    for (const char* dir : {"/usr/bin", "/usr/local/bin", "/bin", "/opt/slurm/bin"})
        if (::access((std::string(dir) + "/squeue").c_str(), X_OK) == 0) return true;
    return false;
}

class SlurmInventory final : public MachineInventory {
public:
    std::string name() const override { return "slurm"; }

    std::vector<CloudInstance> describe(const std::vector<std::string>& ids) override {
        std::vector<CloudInstance> out;
        for (const auto& id : ids) {
            CloudInstance c;
            c.id = id;
            c.state = CloudInstance::State::unknown;
            c.instance_type = "slurm";
            const auto ref = JobRef::parse(id);
            if (!ref) {
                out.push_back(std::move(c));
                continue;
            }
            c.pool_id = pool_of(ref->job_name);
            auto& login = login_for(*ref);
            std::optional<JobState> j;
            if (!ref->job_id.empty()) {
                j = query_job(login, ref->job_id);
            } else {
                // Recorded before sbatch named it: the job (if sbatch ran) has its name.
                for (auto& x : query_by_name(login, ref->job_name))
                    if (!j || x.phase != JobPhase::ended) j = x;
            }
            if (j) {
                c.state = cloud_state(*j);
                c.preempted = j->state == "PREEMPTED";
                c.reason = j->phase == JobPhase::running ? std::string() : end_words(*j);
            }
            out.push_back(std::move(c));
        }
        return out;
    }

    void terminate(const std::vector<std::string>& ids) override {
        std::string failures;
        for (const auto& id : ids) {
            const auto ref = JobRef::parse(id);
            if (!ref) continue;
            auto& login = login_for(*ref);
            const std::string e = cancel_job(login, ref->job_id, ref->job_name);
            if (!e.empty()) failures += (failures.empty() ? "" : "; ") + e;
            // The pool's files on the login node (its srun outputs, its watchdog).
            remove_pool_files(login, pool_of(ref->job_name));
        }
        if (!failures.empty()) throw Error(failures);
    }

    std::vector<CloudInstance> list(std::string_view pool_id) override {
        JobRef base;
        base.login = env_or("SKY_SLURM_LOGIN");
        base.identity_file = env_or("SKY_SLURM_IDENTITY_FILE");
        base.known_hosts = env_or("SKY_SLURM_KNOWN_HOSTS");
        if (base.login.empty() && !local_slurm()) return {};
        auto& login = login_for(base);
        std::vector<CloudInstance> out;
        for (const auto& j : query_sky_jobs(login)) {
            if (j.phase == JobPhase::ended) continue;
            if (!pool_id.empty() && pool_of(j.name) != pool_id) continue;
            JobRef r = base;
            r.login = base.login.empty() ? std::string() : login.describe();
            r.job_name = j.name;
            r.job_id = j.id;
            CloudInstance c;
            c.id = r.to_string();
            c.state = cloud_state(j);
            c.reason = j.reason == "None" ? std::string() : j.reason;
            c.pool_id = pool_of(j.name);
            c.instance_type = "slurm";
            out.push_back(std::move(c));
        }
        return out;
    }

private:
    // One connection per login node for the adapter's life (sshd takes only a few
    // unauthenticated connections at once).
    node::NodeShell& login_for(const JobRef& r) {
        const std::string key = r.login + "\n" + r.identity_file + "\n" + r.known_hosts;
        std::lock_guard lk(m_);
        auto& l = logins_[key];
        if (!l || !l->alive()) {
            LoginOptions o;
            o.login = r.login;
            o.identity_file = r.identity_file;
            o.known_hosts = r.known_hosts;
            l = open_login(o);
        }
        return *l;
    }

    std::mutex m_;
    std::map<std::string, std::unique_ptr<node::NodeShell>> logins_;
};

}  // namespace

std::unique_ptr<MachineInventory> make_slurm_inventory() {
    return std::make_unique<SlurmInventory>();
}

}  // namespace sky::detail
