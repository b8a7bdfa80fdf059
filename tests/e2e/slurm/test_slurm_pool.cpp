// sky::Slurm end to end on a real Slurm cluster of test hosts: a login host (slurmctld, sshd)
// that the client reaches and compute hosts (slurmd) that only the login host reaches, with
// shared and with private homes. Pools run as one job; what the tests check is what a user and
// a cluster admin see: results from the compute nodes, the job in squeue while the pool runs and
// nothing after it, no process left on the nodes.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "hosts/slurm_cluster.hpp"
#include "sky/sky.hpp"

extern char** environ;
namespace fs = std::filesystem;
using sky::test::SlurmCluster;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace slurm_pool {

std::string host_name() {
    char h[256] = {};
    ::gethostname(h, sizeof h - 1);
    return h;
}
int add(int a, int b) { return a + b; }
int nap(int seconds) {
    std::this_thread::sleep_for(std::chrono::seconds(seconds));
    return seconds;
}
std::string env_of(std::string k) {
    const char* v = std::getenv(k.c_str());
    return v ? v : "-";
}
// What a distributed call sees: rank variables, its GPU, where it runs.
std::string rendezvous() {
    const auto i = sky::instance_info();
    std::ostringstream s;
    s << "rank=" << env_of("RANK") << " world=" << env_of("WORLD_SIZE")
      << " local=" << env_of("LOCAL_RANK") << " node_rank=" << env_of("NODE_RANK")
      << " master=" << env_of("MASTER_ADDR") << " port=" << env_of("MASTER_PORT")
      << " cuda=" << env_of("CUDA_VISIBLE_DEVICES") << " host=" << host_name()
      << " private=" << i.private_addr << " workers=" << i.workers_per_node;
    return s.str();
}

struct Events {
    std::mutex m;
    std::vector<std::string> steps;  // BootstrapProgress steps
    std::vector<std::string> all;    // every event, described

    sky::Callback callback() {
        return [this](const sky::Event& e) -> std::optional<sky::Event> {
            std::lock_guard lk(m);
            all.push_back(sky::describe(e));
            if (auto* b = std::get_if<sky::BootstrapProgress>(&e)) steps.push_back(b->step);
            return std::nullopt;
        };
    }
    bool has_step(const std::string& part) {
        std::lock_guard lk(m);
        for (const auto& s : steps)
            if (s.find(part) != std::string::npos) return true;
        return false;
    }
    std::string dump() {
        std::lock_guard lk(m);
        std::string s;
        for (const auto& e : all) s += e + "\n";
        return s;
    }
};

sky::PoolSpec spec_for(const SlurmCluster& c, int nodes, Events& ev) {
    return {.provider = sky::test::slurm_provider(c),
            .nodes = nodes,
            .timeout = std::chrono::minutes(10),
            .idle_timeout = std::chrono::seconds(60),
            .display = sky::Display::quiet,
            .on_event = ev.callback(),
            .collect_metrics = false};
}

// Nothing of the pool left: no job in the queue, no job process on any compute node.
void check_nothing_left(const SlurmCluster& c) {
    CHECK(sky::test::wait_until([&] { return c.queue().empty(); }, 30s));
    INFO("queue: " << c.on_login("squeue").output);
    CHECK(c.queue().empty());
    for (int i = 0; i < c.size(); ++i) {
        CHECK(sky::test::wait_until([&] { return c.job_processes(i).empty(); }, 30s));
        std::string left;
        for (const auto& p : c.job_processes(i)) left += p + "\n";
        INFO("node " << c.node_name(i) << " still runs:\n" << left);
        CHECK(left.empty());
    }
}

// The job of this pool in squeue: "<id> <name> <state>" lines.
std::vector<std::string> jobs_of(const SlurmCluster& c, const std::string& pool_id) {
    auto r = c.on_login("squeue --noheader --format='%i %j %T'");
    std::vector<std::string> out;
    std::istringstream is(r.output);
    for (std::string l; std::getline(is, l);)
        if (l.find("sky-" + pool_id) != std::string::npos) out.push_back(l);
    return out;
}

void run_pool(const SlurmCluster& c, const std::string& placement) {
    Events ev;
    std::string pool_id;
    {
        sky::ComputePool pool{spec_for(c, 2, ev)};
        pool_id = pool.id();
        INFO(ev.dump());
        // One job, running, named after the pool, while the pool runs.
        const auto jobs = jobs_of(c, pool_id);
        REQUIRE(jobs.size() == 1);
        CHECK(jobs[0].find("RUNNING") != std::string::npos);
        CHECK(c.queue().size() == 1);
        CHECK(ev.has_step(placement));
        // Results from the compute nodes: broadcast, single calls, a gather.
        const auto hosts = sky::compute<host_name>() | pool;
        CHECK(hosts == std::vector<std::string>{c.node_name(0), c.node_name(1)});
        CHECK((sky::compute<add>(2, 3) >> pool) == 5);
        std::vector<sky::PendingCompute<int>> many;
        for (int i = 0; i < 50; ++i) many.push_back(sky::compute<add>(i, i));
        const auto sums = sky::gather(std::move(many)) >> pool;
        for (int i = 0; i < 50; ++i) CHECK(sums[static_cast<std::size_t>(i)] == 2 * i);
        const auto inst = pool.instances();
        REQUIRE(inst.size() == 2);
        for (int i = 0; i < 2; ++i) {
            CHECK(inst[static_cast<std::size_t>(i)].provider == "slurm");
            CHECK(inst[static_cast<std::size_t>(i)].private_ip == c.node_address(i));
            CHECK(inst[static_cast<std::size_t>(i)].id.find(c.node_name(i)) != std::string::npos);
        }
    }
    INFO(ev.dump());
    if (std::getenv("SKY_TEST_EVENTS")) WARN(ev.dump());
    check_nothing_left(c);
}

}  // namespace slurm_pool

using namespace slurm_pool;

TEST_CASE("slurm pool: shared homes, broadcast and gather, one job while it runs, none after",
          "[slurm_pool]") {
    SKIP_WITHOUT_SLURM();
    SlurmCluster c({.shared_home = true});
    run_pool(c, "shared file system");
    // A second pool finds the program in the store: nothing is shipped again.
    run_pool(c, "shared file system");
}

TEST_CASE("slurm pool: private homes, the program by sbcast", "[slurm_pool]") {
    SKIP_WITHOUT_SLURM();
    SlurmCluster c({.shared_home = false});
    run_pool(c, "sbcast");
    // The nodes' own stores keep it for the next pool.
    run_pool(c, "cached in each node's store");
    // Each node's launcher removed its run directory when its worker ended.
    const auto run = c.host_path(0, "/root/.sky/run");
    CHECK((!fs::exists(run) || fs::is_empty(run)));
}
