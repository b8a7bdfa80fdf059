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
#include <functional>
#include <future>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "hosts/slurm_cluster.hpp"
#include "sky/sky.hpp"
#include "support/child_process.hpp"
#include "support/crash_expect.hpp"
#include "support/run_log.hpp"
#include "support/scoped_env.hpp"

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
// Kills its own worker the first time it runs on a node (a crash), returns the node after.
int die_once(std::string marker) {
    if (!fs::exists(marker)) {
        std::ofstream(marker) << "crashed once\n";
        ::raise(SIGKILL);
    }
    return sky::instance_info().node;
}
// What a distributed call sees: rank variables, its GPU, where it runs.
std::string rendezvous() {
    const auto i = sky::instance_info();
    std::ostringstream s;
    s << "rank=" << env_of("RANK") << " world=" << env_of("WORLD_SIZE")
      << " local=" << env_of("LOCAL_RANK") << " node_rank=" << env_of("NODE_RANK")
      << " master=" << env_of("MASTER_ADDR") << " port=" << env_of("MASTER_PORT")
      << " cuda=" << env_of("CUDA_VISIBLE_DEVICES") << " host=" << i.hostname
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

// Nothing of the pool left: no job in the queue, no job process on any compute node, nothing
// of sky's on the login node (srun, the watchdog).
void check_nothing_left(const SlurmCluster& c) {
    CHECK(sky::test::wait_until([&] { return c.queue().empty(); }, 30s));
    INFO("queue: " << c.on_login("squeue").output);
    CHECK(c.queue().empty());
    for (int i = -1; i < c.size(); ++i) {
        CHECK(sky::test::wait_until([&] { return c.job_processes(i).empty(); }, 30s));
        std::string left;
        for (const auto& p : c.job_processes(i)) left += p + "\n";
        INFO((i < 0 ? std::string("the login node") : "node " + c.node_name(i)) << " still runs:\n"
                                                                                << left);
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

namespace slurm_pool {

// Another user of a compute node (uid 65534) who squats the program archive's path of every
// sky job in squeue (`/tmp/<job name>-program.tar`, where sbcast once wrote it), waits for the
// archive to be written into the squat, and swaps in their own program (with fs.protected_regular
// at 0, the kernel's default): a `prog` that leaves /tmp/mallory-ran. Runs until /tmp/mallory/stop
// exists or 240 s pass.
std::string quoted(const std::string& s) {
    std::string q = "'";
    for (char ch : s) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    return q + "'";
}

constexpr const char* kSquatter = R"sh(
set -u; cd /tmp || exit 1
trap 'kill $(jobs -p) 2>/dev/null' EXIT
mkdir -p /tmp/mallory/prog/lib && touch /tmp/mallory/prog/.complete
printf '#!/bin/sh\necho "attacker code runs as uid $(id -u)" > /tmp/mallory-ran\n' > "/tmp/mallory/prog/$1"
chmod 755 "/tmp/mallory/prog/$1" && tar -C /tmp/mallory/prog -cf /tmp/mallory/evil.tar . || exit 1
seen=
for _ in $(seq 4800); do
  [ -e /tmp/mallory/stop ] && exit 0
  for j in $(squeue --noheader --format=%j 2>/dev/null); do
    case " $seen " in *" $j "*) continue ;; esac
    seen="$seen $j"
    f="/tmp/$j-program.tar"
    # The squat: the file made world-writable and a descriptor to it kept, which still writes
    # after slurmd has taken the file over (chown, chmod 0700).
    /usr/bin/python3 -c 'import ctypes, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o666); os.fchmod(fd, 0o666)
print("squatted", sys.argv[1], flush=True)
l = ctypes.CDLL("libc.so.6"); i = l.inotify_init()
l.inotify_add_watch(i, sys.argv[1].encode(), 8)  # IN_CLOSE_WRITE
os.read(i, 64)
evil = open(sys.argv[2], "rb").read()
os.pwrite(fd, evil, 0); os.ftruncate(fd, len(evil))
print("swapped", sys.argv[1], flush=True)' "$f" /tmp/mallory/evil.tar &
  done
  sleep 0.05
done
)sh";

}  // namespace slurm_pool

TEST_CASE(
    "slurm pool: another user's squat of the program's old /tmp path neither runs their program "
    "nor stops the pool",
    "[slurm_pool]") {
    SKIP_WITHOUT_SLURM();
    SlurmCluster c({.compute_nodes = 1, .gpus_per_node = 0, .shared_home = false});
    const std::string exe = fs::read_symlink("/proc/self/exe").filename().string();
    auto squatter = std::async(std::launch::async, [&] {
        return c.on_node(0,
                         "exec setpriv --reuid=65534 --regid=65534 --clear-groups bash -c " +
                             quoted(kSquatter) + " squatter " + quoted(exe),
                         250s);
    });
    // The squatter watches squeue before the pool's job exists.
    std::this_thread::sleep_for(1s);
    Events ev;
    std::string pool_id;
    std::optional<int> sum;
    std::string failure;
    try {
        sky::ComputePool pool{spec_for(c, 1, ev)};
        pool_id = pool.id();
        sum = sky::compute<add>(2, 3) >> pool;
    } catch (const std::exception& e) {
        failure = e.what();
    }
    const auto stop = c.host_path(0, "/tmp/mallory/stop");
    std::ofstream(stop.string()) << "stop\n";
    const auto out = squatter.get();
    INFO("pool: " << failure << "\nsquatter: " << out.output << "\nevents:\n" << ev.dump());
    // The squat happened (the old path of this pool's archive is the other user's file)...
    CHECK(out.output.find("squatted /tmp/sky-") != std::string::npos);
    // ...and the genuine program ran, from the private copy; the attacker's never did.
    CHECK(failure.empty());
    CHECK(sum == 5);
    CHECK(ev.has_step("sbcast"));
    CHECK_FALSE(fs::exists(c.host_path(0, "/tmp/mallory-ran")));
    // Nothing of the pool's private directory is left in the node's /tmp.
    for (const auto& e : fs::directory_iterator(c.host_path(0, "/tmp")))
        if (const auto name = e.path().filename().string();
            !pool_id.empty() && name != "sky-" + pool_id + "-program.tar")
            CHECK(name.rfind("sky-" + pool_id + "-", 0) != 0);
    fs::remove_all(c.host_path(0, "/tmp/mallory"));
    check_nothing_left(c);
}

namespace slurm_pool {

// Submits a job that holds `gres` on every node (a user beside the pool) and waits until it
// runs; returns its id.
std::string blocker(const SlurmCluster& c, const std::string& gres) {
    auto r =
        c.on_login("sbatch --parsable --job-name=other-user --nodes=" + std::to_string(c.size()) +
                   " --ntasks-per-node=1 --gres=" + gres +
                   " --output=/dev/null --chdir=/tmp --wrap 'exec sleep 600'");
    REQUIRE(r.status == 0);
    std::string id = r.output.substr(0, r.output.find_first_of(";\n"));
    REQUIRE(sky::test::wait_until(
        [&] {
            return c.on_login("squeue --noheader --format=%T --jobs=" + id)
                       .output.find("RUNNING") != std::string::npos;
        },
        30s));
    return id;
}

// A program of this test binary's own (support/child_process.hpp).
using Child = sky::test::ChildProcess;

// SKY_HOME in a fresh directory (the ledgers of the driver and of `sky gc`), removed at the end.
struct TempHome {
    fs::path dir;
    TempHome() {
        char tmpl[] = "/tmp/sky-slurm-test-XXXXXX";
        REQUIRE(::mkdtemp(tmpl) != nullptr);
        dir = tmpl;
        ::setenv("SKY_HOME", dir.c_str(), 1);
    }
    ~TempHome() {
        ::unsetenv("SKY_HOME");
        std::error_code ec;
        fs::remove_all(dir, ec);
    }
};

std::vector<std::string> driver_args(const SlurmCluster& c) {
    return {SKY_SLURM_DRIVER,
            c.login(),
            c.client_key_path().string(),
            c.known_hosts_file().string(),
            c.options().partition,
            std::to_string(c.size())};
}

}  // namespace slurm_pool

TEST_CASE("slurm pool: the distributed variables from the allocation, one worker per GPU",
          "[slurm_pool]") {
    SKIP_WITHOUT_SLURM();
    SlurmCluster c({.gpus_per_node = 4, .shared_home = true});
    // Another user's job holds two GPUs of each node: Slurm gives the pool the other two, and
    // says which in CUDA_VISIBLE_DEVICES.
    const std::string other = blocker(c, "gpu:h100:2");
    Events ev;
    auto spec = spec_for(c, 2, ev);
    spec.accelerator = "H100:2";  // the cluster spells the type "h100"
    {
        sky::ComputePool pool{spec};
        INFO(ev.dump());
        CHECK(ev.has_step("--gres=gpu:h100:2"));
        const auto r =
            sky::compute<rendezvous>().with(sky::distributed::torch{.backend = "gloo"}) | pool;
        REQUIRE(r.size() == 4);
        std::set<std::string> ports;
        for (int k = 0; k < 4; ++k) {
            const int node = k / 2, local = k % 2;
            const std::string& s = r[static_cast<std::size_t>(k)];
            INFO("rank " << k << ": " << s);
            CHECK(s.find("rank=" + std::to_string(k) + " ") != std::string::npos);
            CHECK(s.find("world=4 ") != std::string::npos);
            CHECK(s.find("local=" + std::to_string(local) + " ") != std::string::npos);
            CHECK(s.find("node_rank=" + std::to_string(node) + " ") != std::string::npos);
            // The head is the job's first node, at its cluster address.
            CHECK(s.find("master=" + c.node_address(0) + " ") != std::string::npos);
            // Each worker on one of the GPUs Slurm gave the job (2 and 3), not the other job's.
            CHECK(s.find("cuda=" + std::to_string(2 + local) + " ") != std::string::npos);
            CHECK(s.find("host=" + c.node_name(node) + " ") != std::string::npos);
            CHECK(s.find("private=" + c.node_address(node) + " ") != std::string::npos);
            CHECK(s.find("workers=2") != std::string::npos);
            ports.insert(s.substr(s.find("port="), s.find(" cuda=") - s.find("port=")));
        }
        CHECK(ports.size() == 1);  // one MASTER_PORT for every rank
        // Only while the call runs.
        CHECK((sky::compute<env_of>("RANK") >> pool) == "-");
    }
    c.on_login("scancel " + other);
    INFO(ev.dump());
    check_nothing_left(c);
}

TEST_CASE("slurm pool: a job Slurm cancels mid-call loses its nodes with the reason",
          "[slurm_pool]") {
    SKIP_WITHOUT_SLURM();
    SlurmCluster c({.shared_home = false});
    Events ev;
    std::string pool_id;
    {
        sky::ComputePool pool{spec_for(c, 2, ev)};
        pool_id = pool.id();
        auto call = pool.submit(sky::compute<nap>(120));
        std::this_thread::sleep_for(1s);
        // An admin (or the scheduler) ends the job.
        const auto jobs = jobs_of(c, pool_id);
        REQUIRE(jobs.size() == 1);
        const std::string id = jobs[0].substr(0, jobs[0].find(' '));
        const auto t0 = Clock::now();
        REQUIRE(c.on_login("scancel " + id).status == 0);
        try {
            call.get();
            FAIL("the call returned although its job was cancelled");
        } catch (const sky::NodeLostError& e) {
            INFO(e.what());
            CHECK(std::string(e.what()).find("CANCELLED") != std::string::npos);
            CHECK(std::string(e.what()).find("job " + id) != std::string::npos);
        }
        // The workers ended at Slurm's SIGTERM, well before its KillWait (30 s) would kill them.
        CHECK(Clock::now() - t0 < 20s);
        // Both nodes are lost (the idle one too): the job that held them is gone.
        CHECK(sky::test::wait_until([&] { return pool.instance_count() == 0; }, 20s));
    }
    INFO(ev.dump());
    check_nothing_left(c);
}

TEST_CASE("slurm pool: past queue_timeout, a ProvisionError quoting the reason, job gone",
          "[slurm_pool]") {
    SKIP_WITHOUT_SLURM();
    SlurmCluster c({.shared_home = true});
    const std::string other = blocker(c, "gpu:h100:2");
    Events ev;
    auto spec = spec_for(c, 2, ev);
    spec.accelerator = "H100:2";
    auto slurm = sky::test::slurm_provider(c);
    slurm.queue_timeout = std::chrono::seconds(4);
    spec.provider = slurm;
    const auto t0 = Clock::now();
    try {
        sky::ComputePool pool{spec};
        FAIL("the pool started although every GPU is taken");
    } catch (const sky::ProvisionError& e) {
        INFO(e.what());
        const std::string what = e.what();
        CHECK(what.find("queue_timeout 4 s") != std::string::npos);
        CHECK(what.find("Resources") != std::string::npos);
        CHECK(what.find("cancelled") != std::string::npos);
    }
    CHECK(Clock::now() - t0 < 60s);
    INFO(ev.dump());
    CHECK(ev.has_step("pending: Resources"));
    // Only the other user's job is left.
    CHECK(c.queue() == std::vector<std::string>{other});
    c.on_login("scancel " + other);
    check_nothing_left(c);
}

TEST_CASE("slurm pool: SIGINT cancels the job, nothing is left", "[slurm_pool]") {
    SKIP_WITHOUT_SLURM();
    TempHome home;
    SlurmCluster c({.shared_home = true});
    Child driver(driver_args(c));
    const auto ready = driver.line("ready ", 120s);
    INFO(driver.seen() << c.logs());
    REQUIRE(ready);
    const std::string pool_id = ready->substr(6);
    REQUIRE(jobs_of(c, pool_id).size() == 1);
    std::this_thread::sleep_for(1s);  // the long call runs
    REQUIRE(::kill(driver.pid(), SIGINT) == 0);
    const auto st = driver.wait(120s);
    REQUIRE(st);
    CHECK(WIFSIGNALED(*st));
    CHECK(WTERMSIG(*st) == SIGINT);
    // The teardown confirmed the job gone before the program died.
    CHECK(jobs_of(c, pool_id).empty());
    check_nothing_left(c);
}

TEST_CASE("slurm pool: kill -9, then sky gc with nothing but the ledger", "[slurm_pool]") {
    SKIP_WITHOUT_SLURM();
    TempHome home;
    SlurmCluster c({.shared_home = false});
    Child driver(driver_args(c));
    const auto ready = driver.line("ready ", 120s);
    INFO(driver.seen() << c.logs());
    REQUIRE(ready);
    const std::string pool_id = ready->substr(6);
    REQUIRE(::kill(driver.pid(), SIGKILL) == 0);
    REQUIRE(driver.wait(30s));
    // The job outlives its client until someone collects it.
    std::this_thread::sleep_for(1s);
    REQUIRE(jobs_of(c, pool_id).size() == 1);
    {
        // `sky ls` shows the dead pool with its job, from the ledger, and sky's jobs at the
        // cluster it is pointed at.
        sky::test::ScopedEnv env({{"SKY_SLURM_LOGIN", c.login()},
                                  {"SKY_SLURM_IDENTITY_FILE", c.client_key_path().string()},
                                  {"SKY_SLURM_KNOWN_HOSTS", c.known_hosts_file().string()}});
        auto ls = sky::test::run_command({SKY_CLI_PATH, "ls", "--provider", "slurm"}, 60s);
        INFO("sky ls: " << ls.output);
        CHECK(ls.status == 0);
        CHECK(ls.output.find(pool_id + "  slurm") != std::string::npos);
        CHECK(ls.output.find("owner gone") != std::string::npos);
        // The tag listing: the job by its name, running, its pool's ledger here.
        CHECK(ls.output.find("sky-" + pool_id + "@" + c.login()) != std::string::npos);
        CHECK(ls.output.find("running") != std::string::npos);
    }
    auto gc = sky::test::run_command({SKY_CLI_PATH, "gc"}, 240s);
    INFO("sky gc: " << gc.output);
    CHECK(gc.status == 0);
    CHECK(jobs_of(c, pool_id).empty());
    check_nothing_left(c);
    // A second gc finds nothing to do.
    gc = sky::test::run_command({SKY_CLI_PATH, "gc"}, 120s);
    CHECK(gc.status == 0);
}

TEST_CASE("slurm pool: on the login node itself, sbatch and friends run locally", "[slurm_pool]") {
    SKIP_WITHOUT_SLURM();
    SlurmCluster c({.shared_home = true});
    // The driver as a user on the login node runs it: copied into the login host (which does
    // not see this build tree), run there with an empty .login.
    const fs::path copy = c.host_path(-1, "/root/sky_slurm_driver");
    fs::copy_file(SKY_SLURM_DRIVER, copy, fs::copy_options::overwrite_existing);
    auto r = c.on_login(
        // Job control: a background job that does not ignore SIGINT, as from a terminal.
        "set -m; export SKY_HOME=/root/.sky-test; /root/sky_slurm_driver - - - " +
            c.options().partition + " " + std::to_string(c.size()) +
            " > /root/driver.out 2>&1 & pid=$!; "
            "for i in $(seq 900); do grep -q '^ready ' /root/driver.out && break; sleep 0.1; "
            "done; cat /root/driver.out; squeue --noheader --format='%j %T'; kill -INT $pid; "
            "wait $pid; echo \"exit $?\"",
        150s);
    INFO(r.output << c.logs());
    CHECK(r.output.find("ready ") != std::string::npos);
    CHECK(r.output.find(" RUNNING") != std::string::npos);
    CHECK(r.output.find("exit 130") != std::string::npos);
    check_nothing_left(c);
}

TEST_CASE(
    "slurm pool: the image's environment, the pool's env kept off command lines, and a "
    "crashed worker restarted in the allocation",
    "[slurm_pool]") {
    SKIP_WITHOUT_SLURM();
    SlurmCluster c({.shared_home = false});
    Events ev;
    auto spec = spec_for(c, 2, ev);
    spec.image.env = {{"SKY_IMAGE_VAR", "from-image"}};
    spec.image.setup = {"echo set up > \"$HOME/setup-ran\""};
    spec.env = {{"SKY_POOL_SECRET", "s3cr3t-value"}};
    {
        sky::ComputePool pool{spec};
        INFO(ev.dump());
        CHECK(ev.has_step("setup"));
        const auto img = sky::compute<env_of>("SKY_IMAGE_VAR") | pool;
        CHECK(img == std::vector<std::string>{"from-image", "from-image"});
        CHECK((sky::compute<env_of>("SKY_POOL_SECRET") >> pool) == "s3cr3t-value");
        for (int i = 0; i < 2; ++i) CHECK(fs::exists(c.host_path(i, "/root/setup-ran")));
        // Never on a command line that `ps` shows on the login node or a compute node.
        CHECK(c.on_login("ps -eo args").output.find("s3cr3t") == std::string::npos);
        for (int i = 0; i < 2; ++i)
            CHECK(c.on_node(i, "ps -eo args").output.find("s3cr3t") == std::string::npos);

        const auto job = c.queue();
        REQUIRE(job.size() == 1);
        // The worker dies mid-call; the call runs again on the other node, whose worker dies
        // too (its /tmp has no mark yet); fresh workers start as new steps of the same job and
        // the second retry runs on one of them.
        const int node = sky::compute<die_once>("/tmp/sky-die-once").retries(2) >> pool;
        CHECK((node == 0 || node == 1));
        CHECK(c.queue() == job);
        CHECK(sky::test::wait_until([&] { return pool.instance_count() == 2; }, 30s));
        const auto hosts = sky::compute<host_name>() | pool;
        CHECK(hosts == std::vector<std::string>{c.node_name(0), c.node_name(1)});
    }
    INFO(ev.dump());
    check_nothing_left(c);
}

namespace slurm_pool {

// A driver whose pool has idle_timeout 5 s is killed (kill -9) and nobody runs sky gc: the job
// must be gone within `within`. `without_watchdog`: the login node's watchdog is ended first
// (as if the login node's sshd kept a dead client's session), so only the workers' launchers
// can release the job, each still its node's current worker.
void killed_client_released(bool shared_home, bool without_watchdog, std::chrono::seconds within) {
    TempHome home;
    SlurmCluster c({.shared_home = shared_home});
    auto args = driver_args(c);
    args.push_back("5");  // idle_timeout
    Child driver(args);
    const auto ready = driver.line("ready ", 120s);
    INFO(driver.seen() << c.logs());
    REQUIRE(ready);
    const std::string pool_id = ready->substr(6);
    const std::string dir = "~/.sky/slurm/" + pool_id;
    if (without_watchdog)
        REQUIRE(c.on_login("kill $(cut -d' ' -f1 " + dir + "/watchdog.pid)").status == 0);
    REQUIRE(::kill(driver.pid(), SIGKILL) == 0);
    REQUIRE(driver.wait(30s));
    REQUIRE(jobs_of(c, pool_id).size() == 1);
    // The workers hear nothing for idle_timeout, end, and (after their wait for a fresh step
    // that never comes) cancel the job; the watchdog, when it runs, already idle_timeout after
    // the client's sshd process ended.
    CHECK(sky::test::wait_until([&] { return jobs_of(c, pool_id).empty(); }, within));
    if (without_watchdog) {
        const std::string said = c.on_login("cat " + dir + "/node-*-1.out").output;
        INFO(said);
        CHECK(said.find("::sky-idle") != std::string::npos);
        CHECK(said.find("::sky-superseded") == std::string::npos);
    }
    c.on_login("rm -rf " + dir);
    check_nothing_left(c);
}

}  // namespace slurm_pool

TEST_CASE(
    "slurm pool: with sshd's processes named sshd-session (OpenSSH 9.8+), the watchdog keeps a "
    "live pool and cancels a killed client's",
    "[slurm_pool]") {
    SKIP_WITHOUT_SLURM();
    TempHome home;
    SlurmCluster c({.compute_nodes = 1, .gpus_per_node = 0, .sshd_session_name = true});
    auto args = driver_args(c);
    args.push_back("5");  // idle_timeout
    Child driver(args);
    const auto ready = driver.line("ready ", 120s);
    INFO(driver.seen() << c.logs());
    REQUIRE(ready);
    const std::string pool_id = ready->substr(6);
    const std::string dir = "~/.sky/slurm/" + pool_id;
    INFO(c.on_login("cat " + dir + "/watchdog.log; ps -eo pid,comm,args | grep -i ssh").output);
    // A live client's pool outlives idle_timeout many times over: the watchdog watches its
    // connection, whatever sshd's processes are called.
    std::this_thread::sleep_for(25s);
    CHECK(jobs_of(c, pool_id).size() == 1);
    REQUIRE(::kill(driver.pid(), SIGKILL) == 0);
    REQUIRE(driver.wait(30s));
    // Gone within idle_timeout of the connection's end (and well before the workers' own
    // idle end plus their 30 s wait for a fresh step, which would take longer).
    CHECK(sky::test::wait_until([&] { return jobs_of(c, pool_id).empty(); }, 30s));
    const std::string log = c.on_login("cat " + dir + "/watchdog.log").output;
    CHECK(log.find("the client is gone") != std::string::npos);
    c.on_login("rm -rf " + dir);
    check_nothing_left(c);
}

TEST_CASE("slurm pool: a killed client's job releases its nodes after idle_timeout",
          "[slurm_pool]") {
    SKIP_WITHOUT_SLURM();
    killed_client_released(true, false, 60s);
}

TEST_CASE(
    "slurm pool: without the login node's watchdog, a killed client's workers still cancel the "
    "job once idle",
    "[slurm_pool]") {
    SKIP_WITHOUT_SLURM();
    // idle_timeout, then the launchers' 30 s wait for a fresh step.
    killed_client_released(false, true, 90s);
}

namespace slurm_pool {

// Naps while it runs in job `first` (until Slurm ends that job), then says which job it ran in.
std::string job_after(std::string first) {
    if (env_of("SLURM_JOB_ID") == first) std::this_thread::sleep_for(std::chrono::seconds(120));
    return env_of("SLURM_JOB_ID");
}

std::string id_of(const std::string& squeue_line) {
    return squeue_line.substr(0, squeue_line.find(' '));
}

// A pool's job that Slurm ends while calls run: the call without retries fails with a
// NodeLostError naming `state` and the job, the events say so, a new job of the pool replaces
// the nodes, the retried call succeeds there; nothing is left after the pool.
void ended_by_slurm(SlurmCluster& c, const std::function<void(const std::string&)>& end_job,
                    const std::string& state, sky::NodeLostError::Reason reason,
                    std::chrono::seconds within, const std::function<void()>& after = {}) {
    Events ev;
    std::string pool_id, first, second;
    {
        sky::ComputePool pool{spec_for(c, 2, ev)};
        pool_id = pool.id();
        auto jobs = jobs_of(c, pool_id);
        REQUIRE(jobs.size() == 1);
        first = id_of(jobs[0]);
        auto plain = pool.submit(sky::compute<nap>(120));
        auto retried = pool.submit(sky::compute<job_after>(first).retries(1));
        std::this_thread::sleep_for(1s);  // both run, one on each node
        const auto t0 = Clock::now();
        end_job(first);
        INFO(c.on_login("squeue -t all; sinfo -N").output << ev.dump());
        REQUIRE(plain.wait_for(within));
        try {
            (void)plain.get();
            FAIL("the call returned although its job ended");
        } catch (const sky::NodeLostError& e) {
            INFO(e.what());
            const std::string what = e.what();
            CHECK(what.find("job " + first + " ended: " + state) != std::string::npos);
            CHECK(e.reason() == reason);
        }
        // The retried call runs again on a node of the replacement job.
        REQUIRE(retried.wait_for(within + 90s));
        second = retried.get();
        CHECK(second != first);
        CHECK(second != "-");
        CHECK(Clock::now() - t0 < within + 90s);
        if (after) after();
        // One job of the pool in the queue: the replacement, running; the first one ended.
        jobs = jobs_of(c, pool_id);
        REQUIRE(jobs.size() == 1);
        CHECK(id_of(jobs[0]) == second);
        CHECK(jobs[0].find("RUNNING") != std::string::npos);
        CHECK(sky::test::wait_until([&] { return pool.instance_count() == 2; }, 30s));
        const auto hosts = sky::compute<host_name>() | pool;
        CHECK(hosts == std::vector<std::string>{c.node_name(0), c.node_name(1)});
        const auto in_job = sky::compute<env_of>("SLURM_JOB_ID") | pool;
        CHECK(in_job == std::vector<std::string>{second, second});
        // The distributed variables follow the new nodes: the head is node 0's new address.
        const auto dist =
            sky::compute<rendezvous>().with(sky::distributed::torch{.backend = "gloo"}) | pool;
        REQUIRE(dist.size() == 2);
        const auto field = [](const std::string& text, const std::string& key) {
            const auto at = text.find(key + "=");
            return at == std::string::npos
                       ? std::string()
                       : text.substr(at + key.size() + 1, text.find(' ', at) - at - key.size() - 1);
        };
        INFO(dist[0] << "\n" << dist[1]);
        CHECK(field(dist[0], "rank") == "0");
        CHECK(!field(dist[0], "master").empty());
        CHECK(field(dist[0], "master") == field(dist[0], "private"));
        CHECK(field(dist[1], "master") == field(dist[0], "private"));
        const std::string log = ev.dump();
        CHECK(log.find("lost: the Slurm job " + first + " ended: " + state) != std::string::npos);
        CHECK(log.find("submitted as job " + second + " to replace job " + first) !=
              std::string::npos);
        CHECK(log.find("replaced by slurm-" + second + "-") != std::string::npos);
        if (reason == sky::NodeLostError::Reason::preempted)
            CHECK(log.find("preempted (the Slurm job " + first) != std::string::npos);
    }
    INFO(ev.dump());
    if (std::getenv("SKY_TEST_EVENTS")) WARN(ev.dump());
    check_nothing_left(c);
}

}  // namespace slurm_pool

TEST_CASE("slurm pool: a job past its time limit (TIMEOUT) is replaced by a new job",
          "[slurm_pool]") {
    SKIP_WITHOUT_SLURM();
    SlurmCluster c({.shared_home = true});
    // An administrator shortens the job's time limit to nothing: slurmctld ends it at its next
    // time-limit check (every 30 s).
    ended_by_slurm(
        c,
        [&](const std::string& job) {
            REQUIRE(c.on_login("scontrol update jobid=" + job + " timelimit=0").status == 0);
        },
        "TIMEOUT", sky::NodeLostError::Reason::unreachable, 75s);
}

TEST_CASE("slurm pool: a node that fails (NODE_FAIL) ends the job, and a new job replaces it",
          "[slurm_pool]") {
    SKIP_WITHOUT_SLURM();
    SlurmCluster c({.shared_home = false});
    // The node goes down; its slurmd answers again at once, so it returns to service
    // (ReturnToService=2) and the new job may get it back.
    ended_by_slurm(
        c,
        [&](const std::string&) {
            REQUIRE(c.on_login("scontrol update nodename=" + c.node_name(1) +
                               " state=down reason=sky-test-node-down")
                        .status == 0);
        },
        "NODE_FAIL", sky::NodeLostError::Reason::unreachable, 45s);
}

TEST_CASE("slurm pool: a preempted job (PREEMPTED) is replaced once the nodes are free again",
          "[slurm_pool]") {
    SKIP_WITHOUT_SLURM();
    SlurmCluster c({.shared_home = true, .preemption = true});
    std::string urgent;
    // A job of a partition of a higher priority tier wants both nodes whole: Slurm cancels the
    // pool's job for it. The replacement waits in the queue until the urgent job ends.
    ended_by_slurm(
        c,
        [&](const std::string&) {
            auto r = c.on_login(
                "sbatch --parsable --partition=urgent --exclusive --nodes=" +
                std::to_string(c.size()) +
                " --job-name=urgent --output=/dev/null --chdir=/tmp --wrap 'exec sleep 8'");
            REQUIRE(r.status == 0);
            urgent = r.output.substr(0, r.output.find_first_of(";\n"));
        },
        "PREEMPTED", sky::NodeLostError::Reason::preempted, 45s,
        [&] {
            // The urgent job ran (and ended) before the replacement started.
            INFO(c.on_login("squeue -t all").output);
            CHECK(c.on_login("squeue -h -t all -o %T -j " + urgent).output.find("COMPLETED") !=
                  std::string::npos);
        });
}

TEST_CASE(
    "slurm pool: a replacement job that waits out queue_timeout is cancelled, and the nodes are "
    "lost",
    "[slurm_pool]") {
    SKIP_WITHOUT_SLURM();
    SlurmCluster c({.shared_home = true, .preemption = true});
    Events ev;
    auto spec = spec_for(c, 2, ev);
    auto slurm = sky::test::slurm_provider(c);
    slurm.queue_timeout = std::chrono::seconds(3);
    spec.provider = slurm;
    std::string urgent, pool_id;
    {
        sky::ComputePool pool{spec};
        pool_id = pool.id();
        const auto jobs = jobs_of(c, pool_id);
        REQUIRE(jobs.size() == 1);
        const std::string first = id_of(jobs[0]);
        auto retried = pool.submit(sky::compute<job_after>(first).retries(1));
        std::this_thread::sleep_for(1s);
        // A job of the higher tier takes both nodes for longer than the replacement may wait.
        auto r = c.on_login(
            "sbatch --parsable --partition=urgent --exclusive --nodes=" + std::to_string(c.size()) +
            " --job-name=urgent --output=/dev/null --chdir=/tmp --wrap 'exec "
            "sleep 300'");
        REQUIRE(r.status == 0);
        urgent = r.output.substr(0, r.output.find_first_of(";\n"));
        // Each node tries three times (a job each, cancelled after 3 s in the queue); then the
        // retried call fails with why.
        REQUIRE(retried.wait_for(150s));
        try {
            (void)retried.get();
            FAIL("the call returned although no node could be replaced");
        } catch (const sky::NodeLostError& e) {
            INFO(e.what() << "\n" << ev.dump());
            const std::string what = e.what();
            CHECK(what.find("replacement failed") != std::string::npos);
            CHECK(what.find("queue_timeout 3 s") != std::string::npos);
            CHECK(what.find("cancelled") != std::string::npos);
        }
        CHECK(sky::test::wait_until([&] { return pool.instance_count() == 0; }, 30s));
        INFO(ev.dump());
        CHECK(ev.dump().find("to replace job " + first) != std::string::npos);
        CHECK(ev.has_step("pending: "));
        // None of the replacement jobs is left: only the urgent job runs.
        CHECK(jobs_of(c, pool_id).empty());
        CHECK(c.queue() == std::vector<std::string>{urgent});
    }
    c.on_login("scancel " + urgent);
    INFO(ev.dump());
    check_nothing_left(c);
}

TEST_CASE("slurm pool: kill -9 after a replacement job, then sky gc cancels that job too",
          "[slurm_pool]") {
    SKIP_WITHOUT_SLURM();
    TempHome home;
    SlurmCluster c({.shared_home = false});
    Child driver(driver_args(c));
    const auto ready = driver.line("ready ", 120s);
    INFO(driver.seen() << c.logs());
    REQUIRE(ready);
    const std::string pool_id = ready->substr(6);
    auto jobs = jobs_of(c, pool_id);
    REQUIRE(jobs.size() == 1);
    const std::string first = id_of(jobs[0]);
    std::this_thread::sleep_for(1s);  // the long call runs
    REQUIRE(c.on_login("scontrol update nodename=" + c.node_name(0) +
                       " state=down reason=sky-test-node-down")
                .status == 0);
    const auto lost = driver.line("lost ", 60s);
    REQUIRE(lost);
    CHECK(lost->find("job " + first + " ended: NODE_FAIL") != std::string::npos);
    // The replacement job runs (the driver calls again there); then the client dies.
    std::string second;
    REQUIRE(sky::test::wait_until(
        [&] {
            jobs = jobs_of(c, pool_id);
            for (const auto& j : jobs)
                if (id_of(j) != first && j.find("RUNNING") != std::string::npos) second = id_of(j);
            return !second.empty();
        },
        90s));
    std::this_thread::sleep_for(2s);  // its workers start
    REQUIRE(::kill(driver.pid(), SIGKILL) == 0);
    REQUIRE(driver.wait(30s));
    REQUIRE(jobs_of(c, pool_id).size() == 1);
    // The ledger named the second job (and the job name covers it): gc finds and cancels it.
    auto gc = sky::test::run_command({SKY_CLI_PATH, "gc"}, 240s);
    INFO("sky gc: " << gc.output);
    CHECK(gc.status == 0);
    CHECK(jobs_of(c, pool_id).empty());
    check_nothing_left(c);
}

namespace slurm_pool {

constexpr const char* kRunsFile = "/tmp/sky-slurm-runs";

// Runs once per call: says so in the node's own /tmp (one O_APPEND write), then naps `ms`.
int record_nap(int id, int ms) {
    sky::test::append_run(kRunsFile, id);
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    return id;
}

// The ids record_nap wrote on this node.
std::vector<int> runs_here() { return sky::test::runs_in(kRunsFile); }

}  // namespace slurm_pool

namespace slurm_pool {

// Six 3-second calls on four slots run through `cut` (four run, two wait): each result arrives
// once, each function runs once, in the same job; the pool resumed its connections, lost and
// replaced nothing, and one watchdog is left on the login node.
void calls_survive(const SlurmCluster& c, const std::function<void()>& cut) {
    Events ev;
    auto spec = spec_for(c, 2, ev);
    spec.concurrency = 2;
    {
        sky::ComputePool pool{spec};
        const auto job = c.queue();
        REQUIRE(job.size() == 1);
        std::vector<sky::Future<int>> calls;
        for (int i = 0; i < 6; ++i) calls.push_back(pool.submit(sky::compute<record_nap>(i, 3000)));
        std::this_thread::sleep_for(1s);
        cut();
        for (int i = 0; i < 6; ++i) {
            INFO(ev.dump());
            REQUIRE(calls[static_cast<std::size_t>(i)].wait_for(90s));
            CHECK(calls[static_cast<std::size_t>(i)].get() == i);
        }
        INFO(ev.dump());
        CHECK(ev.dump().find("reconnected to its worker") != std::string::npos);
        CHECK(ev.dump().find(" lost: ") == std::string::npos);
        CHECK(ev.dump().find("replaced by") == std::string::npos);
        std::map<int, int> runs;
        for (const auto& node : sky::compute<runs_here>() | pool)
            for (int id : node) ++runs[id];
        CHECK(runs.size() == 6);
        for (auto [id, count] : runs) {
            INFO("call " << id);
            CHECK(count == 1);
        }
        CHECK(c.queue() == job);
        // The watchdog moved to the new connection: one is left (the one it replaced may take
        // a moment to go). Counted by this pool's job name: the test hosts share the machine's
        // process table with the other Slurm tests' login nodes.
        std::string watchdogs;
        const std::string count_ours =
            "pgrep -f -c '^bash -c #!/bin/bash.*sky-watchdog watch .*sky-" + pool.id() + "'";
        for (int k = 0; k < 20; ++k) {
            watchdogs = c.on_login(count_ours).output;
            if (watchdogs == "1\n") break;
            std::this_thread::sleep_for(250ms);
        }
        CHECK(watchdogs == "1\n");
        const auto hosts = sky::compute<host_name>() | pool;
        CHECK(hosts == std::vector<std::string>{c.node_name(0), c.node_name(1)});
    }
    INFO(ev.dump());
    if (std::getenv("SKY_TEST_EVENTS")) WARN(ev.dump());
    check_nothing_left(c);
}

// Resets the client's TCP connections to the login node's sshd (as a NAT or a flaky link
// does): every worker's channel and the command channel go with them.
void reset_login_connection(const SlurmCluster& c) {
    auto r = sky::test::run_command({"ss", "-K", "dst", c.login_address(), "dport", "=", ":22"});
    INFO(r.output);
    REQUIRE(r.status == 0);
}

}  // namespace slurm_pool

TEST_CASE(
    "slurm pool: a dropped connection to the login node is resumed, each result once, the job "
    "kept",
    "[slurm_pool][reconnect]") {
    SKIP_WITHOUT_SLURM();
    SlurmCluster c({.shared_home = false});
    calls_survive(c, [&] { reset_login_connection(c); });
}

TEST_CASE(
    "slurm pool: a dropped connection with the login node unreachable for 4 s is resumed once "
    "it answers",
    "[slurm_pool][reconnect]") {
    SKIP_WITHOUT_SLURM();
    SlurmCluster c({.shared_home = true});
    const std::string link = c.client_link();
    struct LinkUp {
        std::string link;
        ~LinkUp() { sky::test::run_command({"ip", "link", "set", link, "up"}); }
    } up{link};
    calls_survive(c, [&] {
        REQUIRE(sky::test::run_command({"ip", "link", "set", link, "down"}).status == 0);
        reset_login_connection(c);
        std::this_thread::sleep_for(4s);  // reconnect attempts fail meanwhile
        REQUIRE(sky::test::run_command({"ip", "link", "set", link, "up"}).status == 0);
    });
}

namespace slurm_pool {

// Node 0's worker's link goes dead (idle_timeout 8 s): the pool replaces it by a fresh step,
// the old worker ends idle later, and the job runs on. What says which step is node 0's worker
// lies in node 0's home: the login node's (shared) or its own (private).
void replaced_worker_ends_idle(bool shared_home) {
    if (sky::test::run_command({"nft", "--version"}).status != 0) {
        WARN("skipped: nft is not installed here: the test cannot cut one worker's link");
        return;
    }
    SlurmCluster c({.shared_home = shared_home});
    Events ev;
    auto spec = spec_for(c, 2, ev);
    // Under the worker's wait for its client (about 40 s): the old worker ends by its idle
    // watchdog, which cancelled the pool's whole job before.
    spec.idle_timeout = 8s;
    struct Unblock {
        const SlurmCluster& c;
        ~Unblock() { c.on_node(0, "nft delete table inet skytest 2>/dev/null"); }
    } unblock{c};
    std::string pool_id;
    {
        sky::ComputePool pool{spec};
        pool_id = pool.id();
        const auto job = c.queue();
        REQUIRE(job.size() == 1);
        CHECK((sky::compute<add>(2, 3) >> pool) == 5);
        // Node 0's first worker step: where its launcher's output is, the port it listens on.
        const std::string old_out = "~/.sky/slurm/" + pool_id + "/node-0-1.out";
        const std::string first = c.on_login("grep -m1 '^::sky-port ' " + old_out).output;
        INFO("node 0's first worker: " << first);
        REQUIRE(first.rfind("::sky-port ", 0) == 0);
        const std::string port = std::to_string(std::stoi(first.substr(11)));
        // Its link goes dead: what the client sends it is dropped, and a new connection to it is
        // refused. It hears nothing, so it ends after idle_timeout; the pool cannot resume its
        // connection and starts a fresh worker step on node 0, in the same job (a port of its
        // own, not blocked).
        auto nft = c.on_node(0,
                             "nft add table inet skytest && nft add chain inet skytest in "
                             "'{ type filter hook input priority 0; }' && "
                             "nft add rule inet skytest in tcp dport " +
                                 port +
                                 " 'tcp flags & (syn | ack) == syn' reject with tcp reset && "
                                 "nft add rule inet skytest in tcp dport " +
                                 port + " drop");
        INFO(nft.output);
        REQUIRE(nft.status == 0);
        const bool replaced = sky::test::wait_until(
            [&] {
                const auto log = ev.dump();
                return log.find("node 0: ") != std::string::npos &&
                       log.find(" replaced by ") != std::string::npos;
            },
            120s);
        INFO(ev.dump() << c.logs());
        REQUIRE(replaced);
        // The old worker ended by its idle watchdog; its launcher found that a newer step is
        // node 0's worker and left the job alone.
        std::string said;
        CHECK(sky::test::wait_until(
            [&] {
                said = c.on_login("cat " + old_out).output;
                return said.find("::sky-superseded ") != std::string::npos ||
                       said.find("::sky-idle") != std::string::npos;
            },
            60s));
        INFO("the old worker's step said:\n" << said);
        CHECK(said.find("idle timeout") != std::string::npos);
        CHECK(said.find("::sky-superseded ") != std::string::npos);
        CHECK(said.find("::sky-idle") == std::string::npos);
        // A cancel would have reached slurmctld by now: the job still runs, calls succeed.
        std::this_thread::sleep_for(3s);
        CHECK(c.queue() == job);
        const auto jobs = jobs_of(c, pool_id);
        REQUIRE(jobs.size() == 1);
        CHECK(jobs[0].find("RUNNING") != std::string::npos);
        const auto hosts = sky::compute<host_name>() | pool;
        CHECK(hosts == std::vector<std::string>{c.node_name(0), c.node_name(1)});
        std::vector<sky::PendingCompute<int>> many;
        for (int i = 0; i < 20; ++i) many.push_back(sky::compute<add>(i, 1));
        const auto sums = sky::gather(std::move(many)) >> pool;
        for (int i = 0; i < 20; ++i) CHECK(sums[static_cast<std::size_t>(i)] == i + 1);
        CHECK(c.queue() == job);
    }
    INFO(ev.dump());
    if (std::getenv("SKY_TEST_EVENTS")) WARN(ev.dump());
    check_nothing_left(c);
}

}  // namespace slurm_pool

TEST_CASE(
    "slurm pool: a worker whose connection could not be resumed ends idle after its fresh step "
    "replaced it, and leaves the job running",
    "[slurm_pool][reconnect]") {
    SKIP_WITHOUT_SLURM();
    replaced_worker_ends_idle(false);
}

TEST_CASE("slurm pool: shared homes, a replaced worker that ends idle later leaves the job running",
          "[slurm_pool][reconnect]") {
    SKIP_WITHOUT_SLURM();
    replaced_worker_ends_idle(true);
}

namespace slurm_pool {

std::string echo_text(std::string s) { return s; }
std::string file_text(std::string path) {
    std::ifstream f(path);
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}
// What `cmd` printed, run with the worker's environment (the image's venv active).
std::string shell_output(std::string cmd) {
    std::string out;
    if (FILE* p = ::popen(cmd.c_str(), "r")) {
        char buf[512];
        for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
        ::pclose(p);
    }
    return out;
}

// What the reader below sees of the code before each seal (the test is not kept runnable
// against it): with the worker's stream unsealed, the step's stdin held the token
// (SKY_WORKER_TOKEN=...) and PoolSpec::env, and every frame crossed in clear, so the
// environment's value, the argument and the result are found as they are; with the image's
// bootstrap unsealed (run once: 5 checks failed), the Image::env value and its name in clear,
// and the file's content and the pip token in the script's base64.
//
// A reader of the cluster network: a raw packet socket (AF_PACKET, every frame of every
// interface) in compute node 0's network namespace, which carries the login node's TCP stream
// to the worker and srun's step I/O. Writes every frame it sees to the file until the stop file
// exists or 240 s pass, except IPv4 TCP frames to or from port argv[3] (the test's pip index,
// plain http here where a real one is https: what pip sends it is not sky's to seal).
constexpr const char* kCapture = R"py(
import os, socket, struct, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.settimeout(0.2)
out = open(sys.argv[1], "wb")
skip = int(sys.argv[3])
print("capturing", flush=True)
end = time.time() + 240
kept = skipped = 0
while time.time() < end and not os.path.exists(sys.argv[2]):
    try:
        f = s.recv(65536)
    except socket.timeout:
        continue
    if len(f) >= 34 and f[12:14] == b"\x08\x00" and f[23] == 6:
        ihl = (f[14] & 15) * 4
        if len(f) >= 14 + ihl + 4:
            sport, dport = struct.unpack("!HH", f[14 + ihl:18 + ihl])
            if skip in (sport, dport):
                skipped += 1
                continue
    kept += 1
    out.write(f)
out.close()
print("kept", kept, "skipped", skipped, flush=True)
)py";

// The forms a secret may take in a script that encodes it: itself, and base64 at each of the
// three offsets a surrounding text may put it at (the characters that depend only on it).
std::vector<std::string> forms_of(const std::string& secret) {
    static constexpr char tbl[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::vector<std::string> out{secret};
    for (int k = 0; k < 3; ++k) {
        const std::string in = std::string(static_cast<std::size_t>(k), '\0') + secret;
        std::string b;
        for (std::size_t i = 0; i + 2 < in.size(); i += 3) {
            const unsigned v = (static_cast<unsigned char>(in[i]) << 16) |
                               (static_cast<unsigned char>(in[i + 1]) << 8) |
                               static_cast<unsigned char>(in[i + 2]);
            for (int j = 3; j >= 0; --j) b += tbl[(v >> (6 * j)) & 63];
        }
        // The first group holds the padding's bits, the last may hold the next text's.
        if (b.size() > 8) out.push_back(b.substr(4, b.size() - 8));
    }
    return out;
}

}  // namespace slurm_pool

TEST_CASE(
    "slurm pool: a reader of the cluster network sees neither the token, nor the environment, "
    "nor the image's secrets, nor a call's arguments or results",
    "[slurm_pool][seal]") {
    SKIP_WITHOUT_SLURM();
    if (std::system("python3 -c 'import venv, ensurepip' > /dev/null 2>&1") != 0) {
        WARN("skipped: python3 with the venv module (python3-venv) is not installed");
        return;
    }
    SlurmCluster c({.compute_nodes = 1, .gpus_per_node = 0, .shared_home = false});
    const std::string pid = std::to_string(::getpid());
    const std::string env_secret = "env-secret-" + pid + "-q7Z";
    const std::string arg_secret = "argument-secret-" + pid + "-k3W";
    const std::string image_env_secret = "image-env-secret-" + pid + "-r5T";
    // The variables' names are made at run time too: the program itself crosses the cluster
    // network (sbcast, in clear by design), and any literal of this file is in its bytes.
    const std::string env_name = "SKY_TEST_SECRET_" + pid;
    const std::string image_env_name = "SKY_TEST_IMAGE_SECRET_" + pid;
    const std::string file_secret = "image-file-secret-" + pid + "-m2V";
    const std::string pip_token = "skypiptoken" + pid + "x9J4d";
    // A private pip index on the login host (the compute node reaches it over the cluster
    // network): its one package only with the token.
    const std::string index_host = c.node_address(0).substr(0, c.node_address(0).rfind('.')) + ".1";
    fs::copy_file(SKY_PIP_INDEX_SCRIPT, c.host_path(-1, "/tmp/pip_index.py"),
                  fs::copy_options::overwrite_existing);
    std::ofstream(c.host_path(-1, "/tmp/pip-token").string()) << pip_token << "\n";
    auto index = std::async(std::launch::async, [&] {
        return c.on_login("python3 /tmp/pip_index.py " + index_host +
                              " /tmp/pip-index-port /tmp/pip-token 200 & echo $! > "
                              "/tmp/pip-index-pid; wait",
                          230s);
    });
    REQUIRE(sky::test::wait_until(
        [&] { return fs::exists(c.host_path(-1, "/tmp/pip-index-port")); }, 20s));
    std::string port;
    std::ifstream(c.host_path(-1, "/tmp/pip-index-port")) >> port;
    const std::string base = "http://" + index_host + ":" + port;
    // The node's own pip settings: the index without credentials instead of PyPI (nothing from
    // the internet), plain http allowed for it.
    fs::create_directories(c.host_path(0, "/root/.config/pip"));
    std::ofstream(c.host_path(0, "/root/.config/pip/pip.conf").string())
        << "[global]\nindex-url = " << base << "/public/simple\ntrusted-host = " << index_host
        << "\ntimeout = 10\nretries = 0\ndisable-pip-version-check = true\n";
    const std::string capture = "/tmp/sky-capture.bin", stop = "/tmp/sky-capture.stop";
    auto reader = std::async(std::launch::async, [&] {
        return c.on_node(0,
                         "exec /usr/bin/python3 -c " + quoted(kCapture) + " " + capture + " " +
                             stop + " " + port,
                         260s);
    });
    std::this_thread::sleep_for(1s);
    Events ev;
    std::string failure, seen_env, seen_image_env, seen_file, seen_pkg, seen_arg, port_line;
    try {
        auto spec = spec_for(c, 1, ev);
        spec.env[env_name] = env_secret;
        spec.image = sky::Image{.pip = {"skytokpkg==1.0"},
                                .pip_extra_index_url = "http://sky:" + pip_token + "@" +
                                                       index_host + ":" + port + "/simple",
                                .env = {{image_env_name, image_env_secret}},
                                .files = {{"/root/sky-image-secret", file_secret + "\n", 0600}}};
        sky::ComputePool pool{spec};
        seen_env = sky::compute<env_of>(env_name) >> pool;
        seen_image_env = sky::compute<env_of>(image_env_name) >> pool;
        seen_file = sky::compute<file_text>(std::string("/root/sky-image-secret")) >> pool;
        seen_pkg = sky::compute<shell_output>(
                       std::string("python3 -c 'import skytokpkg; print(skytokpkg.VALUE)'")) >>
                   pool;
        seen_arg = sky::compute<echo_text>(arg_secret) >> pool;
        port_line =
            c.on_login("grep -h -m1 '^::sky-port ' ~/.sky/slurm/" + pool.id() + "/node-0-1.out")
                .output;
    } catch (const sky::BootstrapError& e) {
        failure = e.what();
        for (const auto& l : e.output()) failure += "\n  " + l;
    } catch (const std::exception& e) {
        failure = e.what();
    }
    std::ofstream(c.host_path(0, stop).string()) << "stop\n";
    const auto r = reader.get();
    std::ifstream f(c.host_path(0, capture), std::ios::binary);
    const std::string seen((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    fs::remove(c.host_path(0, capture));
    fs::remove(c.host_path(0, stop));
    fs::remove(c.host_path(0, "/root/.config/pip/pip.conf"));
    // The index serves for 200 s at most; ended now, by its pid. Its output says what pip asked
    // it for.
    c.on_login("kill \"$(cat /tmp/pip-index-pid)\" 2> /dev/null || true");
    const auto served = index.get();
    INFO("pool: " << failure << "\nreader: " << r.output << "\nindex: " << served.output
                  << "\nevents:\n"
                  << ev.dump());
    REQUIRE(failure.empty());
    // Everything reached the worker: the pool's and the image's environment, the image's file,
    // the package from the private index (with the token), the argument and the result.
    CHECK(seen_env == env_secret);
    CHECK(seen_image_env == image_env_secret);
    CHECK(seen_file == file_secret + "\n");
    CHECK(seen_pkg == "4242\n");
    CHECK(seen_arg == arg_secret);
    CHECK(served.output.find("served /simple/skytokpkg/ auth=yes") != std::string::npos);
    // The reader saw the pool's traffic: the step's stdin (the client's public key, in clear by
    // design) and the worker's answer with its port and public key.
    INFO("captured " << seen.size() << " bytes; the worker said: " << port_line);
    REQUIRE(seen.size() > 10000);
    CHECK(seen.find("x25519:") != std::string::npos);
    const auto key_at = port_line.find("x25519:");
    REQUIRE(key_at != std::string::npos);
    CHECK(seen.find(port_line.substr(key_at, 7 + 64)) != std::string::npos);
    // ...and the bootstrap's box went by (the node's key for it came back in clear).
    CHECK(seen.find("sky-box /tmp/sky-box-") != std::string::npos);
    // ...and none of what is secret: no value of either environment, no file's content, no pip
    // token (plain or base64, as the script holds it), no argument, no result, and no token (a
    // token never travels: there is none to find on the step's stdin, whose first line is a
    // public key). The bootstrap's output does cross in clear (pip's progress names the
    // package: the packages an image installs are not secret).
    for (const auto& secret : {env_secret, image_env_secret, file_secret, pip_token, arg_secret})
        for (const auto& form : forms_of(secret)) {
            INFO("looking for " << form << " (of " << secret << ")");
            CHECK(seen.find(form) == std::string::npos);
        }
    CHECK(seen.find(env_name) == std::string::npos);
    CHECK(seen.find(image_env_name) == std::string::npos);
    // A token in an environment assignment would be hex after the name; the name alone is a
    // literal of the program, whose bytes cross by sbcast.
    CHECK_FALSE(std::regex_search(seen, std::regex("SKY_WORKER_TOKEN=[0-9a-f]{16}")));
    check_nothing_left(c);
}

namespace slurm_crash {

int* volatile null_target = nullptr;

// Not inlined into sky's call wrapper: the frame the test looks for is the function's own.
__attribute__((noinline)) int write_through_null(int x) {
    std::cout << "crashing on the compute node" << std::endl;
    *null_target = x;  // SIGSEGV here
    return x;
}
const int null_write_line = __LINE__ - 3;

int plus_one(int x) { return x + 1; }

}  // namespace slurm_crash

TEST_CASE(
    "slurm pool: a segfault's signal, function, line and last output come back in the "
    "NodeLostError, and the node serves again",
    "[slurm_pool][crash]") {
    SKIP_WITHOUT_SLURM();
    SlurmCluster c({.compute_nodes = 1, .gpus_per_node = 0, .shared_home = false});
    Events ev;
    {
        sky::ComputePool pool{spec_for(c, 1, ev)};
        try {
            sky::compute<slurm_crash::write_through_null>(3) >> pool;
            FAIL("no exception");
        } catch (const sky::NodeLostError& e) {
            INFO(ev.dump());
            sky::test::expect_null_write(e, "slurm_crash::write_through_null",
                                         "test_slurm_pool.cpp", slurm_crash::null_write_line,
                                         "crashing on the compute node");
        }
        // A fresh worker on the node, as on any other provider.
        CHECK((sky::compute<slurm_crash::plus_one>(1) >> pool) == 2);
    }
    check_nothing_left(c);
}

namespace slurm_pool {

// What one rank saw of a notice (api.md §10a).
struct NoticeSeen {
    int node = -1;
    std::int64_t saved = -2;  // the step it saved (-2: no notice came)
    std::int64_t checkpoint_step = -2;
    double seen_at = 0;   // system clock, seconds
    double deadline = 0;  // the notice's, seconds
    std::string reason;
    bool usr1_ignored = false;  // this worker process starts with SIGUSR1 ignored

    template <class A>
    void serialize(A& ar) {
        ar(node, saved, checkpoint_step, seen_at, deadline, reason, usr1_ignored);
    }
};

double epoch_seconds(std::chrono::system_clock::time_point t) {
    return std::chrono::duration<double>(t.time_since_epoch()).count();
}

// api.md §10a's loop: a step every 400 ms, reported; at a notice, the agreed step is saved and
// the call returns (at most `limit_s` of steps).
NoticeSeen notice_loop(int limit_s) {
    NoticeSeen r;
    r.node = sky::instance_info().node;
    struct sigaction sa {};
    ::sigaction(SIGUSR1, nullptr, &sa);
    r.usr1_ignored = sa.sa_handler == SIG_IGN;
    // Steps of 400 ms: longer than the progress report's lag and the notice's way to the ranks
    // (client -> login node -> compute node), so no rank is past the agreed step when it reads
    // the notice.
    for (std::int64_t step = 0; step < limit_s * 1000 / 400; ++step) {
        std::this_thread::sleep_for(std::chrono::milliseconds(400));
        sky::progress(step);
        auto p = sky::preemption();
        if (!p) continue;
        if (r.seen_at == 0) {
            r.seen_at = epoch_seconds(std::chrono::system_clock::now());
            r.checkpoint_step = p->checkpoint_step;
            r.deadline = epoch_seconds(p->deadline);
            r.reason = p->reason;
        }
        if (step >= p->checkpoint_step) {
            r.saved = step;
            return r;
        }
    }
    return r;
}

}  // namespace slurm_pool

TEST_CASE("slurm pool: the job's --signal before its time limit is a notice on every rank",
          "[slurm_pool][preemption]") {
    SKIP_WITHOUT_SLURM();
    SlurmCluster c({.shared_home = true});
    Events ev;
    std::mutex nm;  // the pool's event thread writes, the test reads
    std::vector<sky::PreemptionNotice> notices;
    auto spec = spec_for(c, 2, ev);
    // --time=2 (minutes), so --signal=USR1@30: Slurm signals the steps between 60 s and 90 s
    // into the job (it checks every 30 s).
    spec.timeout = std::chrono::minutes(2);
    spec.on_event = [&, inner = ev.callback()](const sky::Event& e) -> std::optional<sky::Event> {
        if (auto* n = std::get_if<sky::PreemptionNotice>(&e)) {
            std::lock_guard lk(nm);
            notices.push_back(*n);
        }
        return inner(e);
    };
    std::vector<NoticeSeen> seen;
    {
        sky::ComputePool pool{spec};
        const auto jobs = jobs_of(c, pool.id());
        REQUIRE(jobs.size() == 1);
        seen = sky::compute<notice_loop>(110) | pool;
        // The ranks answered: their job still ran when they saw the notice and saved.
        CHECK(c.queue().size() == 1);
        // Each node of the job got the signal: one event per node's machine (the second may
        // come a moment after the ranks, which saved at the first).
        CHECK(sky::test::wait_until(
            [&] {
                std::lock_guard lk(nm);
                return notices.size() == 2;
            },
            10s));
    }
    INFO(ev.dump());
    REQUIRE(seen.size() == 2);
    for (const auto& r : seen) {
        INFO("rank " << r.node << ": " << r.reason);
        CHECK(r.saved >= 0);
        CHECK(r.saved == r.checkpoint_step);
        CHECK(r.reason.find("--signal=USR1@30") != std::string::npos);
        CHECK(r.seen_at < r.deadline);
        // The signal reaches every process of the step: the worker's start with it ignored.
        CHECK(r.usr1_ignored);
    }
    CHECK(seen[0].checkpoint_step == seen[1].checkpoint_step);
    CHECK(seen[0].checkpoint_step >= 1);
    std::lock_guard lk(nm);
    REQUIRE(notices.size() == 2);
    for (const auto& n : notices) CHECK(n.checkpoint_step == seen[0].checkpoint_step);
    check_nothing_left(c);
}
