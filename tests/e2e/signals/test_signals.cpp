// A program that owns a pool (driver.cpp, written from api.md) is interrupted: SIGINT, SIGTERM
// and SIGHUP tear its pools down and it then dies by the signal, leaving nothing; killed with
// SIGKILL it leaves a ledger (and machines) that the built `sky gc` collects at once, while a
// running pool's machines are never touched. Interrupted during a call, a program whose event
// handler holds its locals dies by SIGINT on every provider (Local, Simulated, SSH test hosts,
// the fake EC2 and the REST clouds' fakes on test hosts), with no event after the pool is gone.
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "aws/ec2_client.hpp"
#include "fakes/digitalocean/fake_digitalocean.hpp"
#include "fakes/ec2/fake_ec2.hpp"
#include "fakes/runpod/fake_runpod.hpp"
#include "fakes/vastai/fake_vastai.hpp"
#include "fakes/verda/fake_verda.hpp"
#include "hosts/test_hosts.hpp"
#include "ledger/ledger.hpp"
#include "support/child_process.hpp"
#include "support/cloud_pool.hpp"

extern char** environ;

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

const std::string kKey = "AKIDSKYSIGNALSTEST01";
const std::string kSecret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYSKYSIGNALS";

// SKY_HOME in a fresh directory (the ledger of the drivers and of `sky gc`), removed at the end.
struct TempHome {
    fs::path dir;
    TempHome() {
        char tmpl[] = "/tmp/sky-signals-test-XXXXXX";
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

// The driver program: this build's, or SKY_TEST_SIGNAL_DRIVER (a sanitized build's driver run
// by this test program, docs/sanitizers.md).
std::string driver_path() {
    const char* other = std::getenv("SKY_TEST_SIGNAL_DRIVER");
    return other && *other ? other : SKY_SIGNAL_DRIVER;
}

// The driver as a child process (support/child_process.hpp): its own process group, so a
// terminal's Ctrl-C reaches the group, a test's kill() the driver only (its Local workers then
// end by the teardown, not by the same signal).
class Driver : public sky::test::ChildProcess {
public:
    // `wrapper`: a command that runs the driver (e.g. unshare with its options).
    explicit Driver(const std::vector<std::string>& args,
                    const std::vector<std::string>& extra_env = {},
                    const std::vector<std::string>& wrapper = {})
        : ChildProcess(command(args, wrapper), extra_env) {}
    [[nodiscard]] const std::string& output() const { return seen(); }

private:
    static std::vector<std::string> command(const std::vector<std::string>& args,
                                            const std::vector<std::string>& wrapper) {
        std::vector<std::string> argv = wrapper;
        argv.push_back(driver_path());
        argv.insert(argv.end(), args.begin(), args.end());
        return argv;
    }
};

// Processes whose parent is `pid` (a Local pool's workers).
std::vector<long> children_of(long pid) {
    std::vector<long> out;
    for (const auto& e : fs::directory_iterator("/proc")) {
        const std::string name = e.path().filename();
        if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
        std::ifstream in(e.path() / "stat");
        std::string stat;
        std::getline(in, stat);
        const auto close = stat.rfind(')');
        if (close == std::string::npos) continue;
        std::istringstream rest(stat.substr(close + 1));
        std::string state;
        long ppid = 0;
        rest >> state >> ppid;
        if (ppid == pid && state != "Z") out.push_back(std::stol(name));
    }
    return out;
}

bool running(long pid) { return !sky::detail::process_identity(pid).empty(); }

std::optional<sky::detail::LedgerRecord> ledger_of(const std::string& pool_id) {
    for (auto& r : sky::detail::Ledger::read_all())
        if (r.pool_id == pool_id) return r;
    return std::nullopt;
}

std::string pool_of(const std::string& ready_line) { return ready_line.substr(6); }

// `sky <args>` (the built binary), bounded.
sky::test::CommandResult sky_cli(std::vector<std::string> args) {
    args.insert(args.begin(), SKY_CLI_PATH);
    return sky::test::run_command(args, 120s);
}

std::string wait_status(int st) {
    if (WIFSIGNALED(st)) return "killed by signal " + std::to_string(WTERMSIG(st));
    if (WIFEXITED(st)) return "exited with status " + std::to_string(WEXITSTATUS(st));
    return "wait status " + std::to_string(st);
}

void check_killed_by(std::optional<int> st, int sig, const Driver& d) {
    INFO("driver output:\n" << d.output());
    REQUIRE(st.has_value());
    INFO(wait_status(*st));
    CHECK((WIFSIGNALED(*st) && WTERMSIG(*st) == sig));
}

}  // namespace

TEST_CASE(
    "signals: SIGINT, SIGTERM and SIGHUP tear a Local pool down, then the program dies by "
    "the signal",
    "[signals]") {
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
        INFO("signal " << sig);
        TempHome home;
        Driver d({"local", "--nodes", "2"});
        auto ready = d.line("ready ", 60s);
        REQUIRE(ready);
        const std::string pool = pool_of(*ready);
        const auto workers = children_of(d.pid());
        REQUIRE(workers.size() == 2);
        auto before = ledger_of(pool);
        REQUIRE(before);
        CHECK(before->provider == "local");
        CHECK(before->owner_pid == d.pid());
        CHECK(before->owner() == sky::detail::LedgerRecord::Owner::alive);
        CHECK_FALSE(before->closed);
        std::set<std::string> recorded(before->instances.begin(), before->instances.end());
        for (long w : workers) CHECK(recorded.count("local-" + std::to_string(w)));

        REQUIRE(::kill(d.pid(), sig) == 0);
        check_killed_by(d.wait(30s), sig, d);
        for (long w : workers) CHECK_FALSE(running(w));
        // The teardown ran (not only the workers' parent-death signal): the ledger is closed
        // with every worker confirmed gone.
        auto after = ledger_of(pool);
        REQUIRE(after);
        CHECK(after->closed);
        CHECK(after->closed_by == "owner");
        CHECK(after->live_instances().empty());
    }
}

TEST_CASE("signals: a second SIGINT during the teardown ends the program at once", "[signals]") {
    TempHome home;
    Driver d({"local", "--slow-teardown"});
    REQUIRE(d.line("ready ", 60s));
    REQUIRE(::kill(d.pid(), SIGINT) == 0);
    // The teardown has started and now waits 30 s in the program's event handler.
    REQUIRE(d.line("stopping", 20s));
    CHECK_FALSE(d.wait(300ms).has_value());
    const auto t0 = Clock::now();
    REQUIRE(::kill(d.pid(), SIGINT) == 0);
    check_killed_by(d.wait(5s), SIGINT, d);
    CHECK(Clock::now() - t0 < 5s);
}

TEST_CASE("signals: an ignored SIGHUP stays ignored and a program's own handler stays its own",
          "[signals]") {
    TempHome home;
    SECTION("SIG_IGN (nohup)") {
        Driver d({"local", "--ignore-hup"});
        REQUIRE(d.line("ready ", 60s));
        REQUIRE(::kill(d.pid(), SIGHUP) == 0);
        CHECK_FALSE(d.wait(1500ms).has_value());  // still running its call
        REQUIRE(::kill(d.pid(), SIGINT) == 0);    // the others are still sky's
        check_killed_by(d.wait(30s), SIGINT, d);
    }
    SECTION("the program's own SIGTERM handler") {
        Driver d({"local", "--own-term-handler"});
        REQUIRE(d.line("ready ", 60s));
        REQUIRE(::kill(d.pid(), SIGTERM) == 0);
        auto st = d.wait(30s);
        REQUIRE(st);
        CHECK(WIFEXITED(*st));
        if (WIFEXITED(*st)) CHECK(WEXITSTATUS(*st) == 42);
    }
}

TEST_CASE(
    "signals: after SIGKILL sky gc closes the dead Local pool and never touches a running one",
    "[signals]") {
    TempHome home;
    Driver dead({"local"});
    Driver live({"local"});
    auto dead_ready = dead.line("ready ", 60s);
    auto live_ready = live.line("ready ", 60s);
    REQUIRE(dead_ready);
    REQUIRE(live_ready);
    const auto live_workers = children_of(live.pid());
    REQUIRE(live_workers.size() == 1);
    REQUIRE(::kill(dead.pid(), SIGKILL) == 0);
    check_killed_by(dead.wait(10s), SIGKILL, dead);
    auto rec = ledger_of(pool_of(*dead_ready));
    REQUIRE(rec);
    CHECK_FALSE(rec->closed);
    CHECK(rec->owner() == sky::detail::LedgerRecord::Owner::dead);

    auto ls = sky_cli({"ls"});
    INFO(ls.output);
    CHECK(ls.status == 0);
    CHECK(ls.output.find(pool_of(*dead_ready)) != std::string::npos);
    CHECK(ls.output.find("owner gone") != std::string::npos);
    CHECK(ls.output.find(pool_of(*live_ready)) != std::string::npos);
    CHECK(ls.output.find("running") != std::string::npos);

    auto dry = sky_cli({"gc", "--dry-run", "--provider", "local"});
    INFO(dry.output);
    CHECK(dry.status == 0);
    CHECK_FALSE(ledger_of(pool_of(*dead_ready))->closed);

    auto gc = sky_cli({"gc", "--provider", "local"});
    INFO(gc.output);
    CHECK(gc.status == 0);
    CHECK(gc.output.find("running: left alone") != std::string::npos);
    rec = ledger_of(pool_of(*dead_ready));
    REQUIRE(rec);
    CHECK(rec->closed);
    CHECK(rec->closed_by == "gc");
    CHECK(rec->live_instances().empty());
    // The running pool: untouched.
    auto l = ledger_of(pool_of(*live_ready));
    REQUIRE(l);
    CHECK_FALSE(l->closed);
    for (long w : live_workers) CHECK(running(w));
    CHECK_FALSE(live.wait(0ms).has_value());
    REQUIRE(::kill(live.pid(), SIGINT) == 0);
    check_killed_by(live.wait(30s), SIGINT, live);
}

TEST_CASE("signals: sky gc kills a dead Local pool's leftover worker, and only a proven one",
          "[signals]") {
    TempHome home;
    const std::string pool = "feedc0de12345678";
    // A worker of that pool whose client is gone: the driver in worker mode, waiting (60 s at
    // most) for its client's handshake on fd 3.
    int sv[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, sv[1], 3);
    std::vector<std::string> argv_s = {driver_path(), "--sky-worker"};
    std::vector<std::string> env_s = {"SKY_WORKER_FD=3", "SKY_WORKER_TOKEN=0123456789abcdef",
                                      "SKY_PARENT_POOL=" + pool, "PATH=/usr/bin:/bin"};
    std::vector<char*> argv, envp;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env_s) envp.push_back(e.data());
    envp.push_back(nullptr);
    pid_t worker = -1;
    REQUIRE(::posix_spawn(&worker, argv[0], &fa, nullptr, argv.data(), envp.data()) == 0);
    posix_spawn_file_actions_destroy(&fa);
    ::close(sv[1]);
    // Another process whose pid the ledger also names: not a worker of the pool.
    pid_t other = -1;
    {
        char sleep_s[] = "sleep", secs[] = "60";
        char* a[] = {sleep_s, secs, nullptr};
        REQUIRE(::posix_spawnp(&other, "sleep", nullptr, nullptr, a, environ) == 0);
    }
    struct Reap {
        pid_t a, b;
        int fd;
        ~Reap() {
            for (pid_t p : {a, b}) {
                ::kill(p, SIGKILL);
                int st;
                ::waitpid(p, &st, 0);
            }
            ::close(fd);
        }
    } reap{worker, other, sv[0]};
    std::this_thread::sleep_for(200ms);  // the worker reads its environment and waits
    REQUIRE(running(worker));
    // The pool's ledger, as its client (a process that has ended) wrote it.
    const pid_t gone = ::fork();
    if (gone == 0) ::_exit(0);
    int st = 0;
    ::waitpid(gone, &st, 0);
    fs::create_directories(home.dir / "pools");
    {
        std::ofstream f(home.dir / "pools" / (pool + ".jsonl"));
        f << R"({"sky_ledger":1,"type":"pool","pool":")" << pool
          << R"(","provider":"local","region":"","pid":)" << gone
          << R"(,"pid_start":"x:1","host":")" << sky::detail::this_host()
          << R"(","started":1700000000})"
          << "\n"
          << R"({"type":"instance","id":"local-)" << worker << R"("})"
          << "\n"
          << R"({"type":"instance","id":"local-)" << other << R"("})"
          << "\n";
    }
    ::chmod((home.dir / "pools").c_str(), 0700);

    auto dry = sky_cli({"gc", "--dry-run"});
    INFO(dry.output);
    CHECK(dry.output.find("would kill leftover worker pid " + std::to_string(worker)) !=
          std::string::npos);
    CHECK(running(worker));

    auto gc = sky_cli({"gc"});
    INFO(gc.output);
    CHECK(gc.status == 0);
    CHECK(sky::test::wait_until([&] { return !running(worker); }, 5s));
    CHECK(running(other));  // its pid is in the ledger, but it is not the pool's worker
    auto rec = ledger_of(pool);
    REQUIRE(rec);
    CHECK(rec->closed);
    CHECK(rec->live_instances().empty());
}

TEST_CASE("signals: sky gc closes a dead SSH pool's ledger and terminates nothing", "[signals]") {
    TempHome home;
    const pid_t gone = ::fork();
    if (gone == 0) ::_exit(0);
    int st = 0;
    ::waitpid(gone, &st, 0);
    fs::create_directories(home.dir / "pools");
    ::chmod((home.dir / "pools").c_str(), 0700);
    {
        std::ofstream f(home.dir / "pools" / "5511aa22.jsonl");
        f << R"({"sky_ledger":1,"type":"pool","pool":"5511aa22","provider":"ssh","region":"","pid":)"
          << gone << R"(,"pid_start":"x:1","host":")" << sky::detail::this_host()
          << R"(","started":1700000000})"
          << "\n"
          << R"({"type":"instance","id":"ssh:root@192.0.2.7:22"})"
          << "\n";
    }
    auto ls = sky_cli({"ls", "--provider", "ssh"});
    INFO(ls.output);
    CHECK(ls.output.find("owner gone") != std::string::npos);
    CHECK(ls.output.find("ssh:root@192.0.2.7:22") != std::string::npos);
    auto gc = sky_cli({"gc", "--provider", "ssh"});
    INFO(gc.output);
    CHECK(gc.status == 0);
    CHECK(gc.output.find("nothing to terminate") != std::string::npos);
    auto rec = ledger_of("5511aa22");
    REQUIRE(rec);
    CHECK(rec->closed);
    CHECK(rec->closed_by == "gc");
    CHECK(rec->live_instances().empty());
    // Closed with nothing left: no longer listed.
    ls = sky_cli({"ls", "--provider", "ssh"});
    CHECK(ls.output.find("5511aa22") == std::string::npos);
}

// ---- over the fake EC2 (its instances are test hosts: root only) ----

namespace {

std::string model_path() {
    const char* dir = std::getenv("SKY_TESTDATA_DIR");
    return std::string(dir && *dir ? dir : SKY_TESTDATA_DIR) + "/ec2-model/service-2.json";
}

struct AwsEnv {
    explicit AwsEnv(const std::string& endpoint) {
        ::setenv("AWS_ACCESS_KEY_ID", kKey.c_str(), 1);
        ::setenv("AWS_SECRET_ACCESS_KEY", kSecret.c_str(), 1);
        ::unsetenv("AWS_SESSION_TOKEN");
        ::setenv("AWS_REGION", "us-east-1", 1);
        ::setenv("AWS_ENDPOINT_URL_EC2", endpoint.c_str(), 1);
        ::setenv("SKY_AWS_SSH_USER", "root", 1);  // test hosts authorize root
    }
    ~AwsEnv() {
        for (const char* v : {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION",
                              "AWS_ENDPOINT_URL_EC2", "SKY_AWS_SSH_USER"})
            ::unsetenv(v);
    }
};

sky::test::FakeEc2Options fake_options(sky::test::TestHosts* hosts) {
    sky::test::FakeEc2Options o;
    const std::string types =
        std::string(SKY_TESTDATA_DIR) + "/ec2-instance-types/accelerated-instance-types.json";
    if (fs::exists(types)) o.instance_types_path = types;
    o.access_key_id = kKey;
    o.secret_access_key = kSecret;
    o.model_path = model_path();
    o.hosts = hosts;
    return o;
}

// Instances that have not reached shutting-down or terminated, of one pool ("" = any).
int live_instances(const sky::test::FakeEc2& fake, const std::string& pool = "") {
    int n = 0;
    for (const auto& i : fake.instances()) {
        const std::string s = i["State"]["Name"];
        if (s == "terminated" || s == "shutting-down") continue;
        bool mine = pool.empty();
        if (i.contains("Tags"))
            for (const auto& t : i["Tags"])
                mine = mine || (t["Key"] == "sky:pool" && t["Value"] == pool);
        n += mine ? 1 : 0;
    }
    return n;
}

#define SKIP_WITHOUT_FAKE_EC2()                                                     \
    SKIP_WITHOUT_HOSTS();                                                           \
    if (!fs::exists(model_path())) {                                                \
        WARN("skipped: no EC2 model at " << model_path() << " (SKY_TESTDATA_DIR)"); \
        return;                                                                     \
    }

}  // namespace

TEST_CASE("signals: SIGINT tears down a pool over the fake EC2 and no instance is left",
          "[signals_aws]") {
    SKIP_WITHOUT_FAKE_EC2();
    TempHome home;
    sky::test::TestHosts hosts(2);
    sky::test::FakeEc2 fake(fake_options(&hosts));
    AwsEnv env(fake.endpoint());
    Driver d({"aws", "--nodes", "2", "--endpoint", fake.endpoint()});
    auto ready = d.line("ready ", 120s);
    INFO(d.output());
    REQUIRE(ready);
    const std::string pool = pool_of(*ready);
    CHECK(live_instances(fake, pool) == 2);
    auto rec = ledger_of(pool);
    REQUIRE(rec);
    CHECK(rec->provider == "aws");
    CHECK(rec->live_instances().size() == 2);  // every instance recorded before it ran

    REQUIRE(::kill(d.pid(), SIGINT) == 0);
    check_killed_by(d.wait(60s), SIGINT, d);
    CHECK(live_instances(fake) == 0);
    rec = ledger_of(pool);
    REQUIRE(rec);
    CHECK(rec->closed);
    CHECK(rec->live_instances().empty());
    CHECK(sky::test::wait_until([] { return sky::test::remote_workers() == 0; }, 10s));
}

TEST_CASE(
    "signals: after SIGKILL sky gc ends the dead pool's instances at once, never a running "
    "pool's",
    "[signals_aws]") {
    SKIP_WITHOUT_FAKE_EC2();
    TempHome home;
    sky::test::TestHosts hosts(2);
    sky::test::FakeEc2 fake(fake_options(&hosts));
    AwsEnv env(fake.endpoint());
    Driver dead({"aws", "--endpoint", fake.endpoint()});
    auto dead_ready = dead.line("ready ", 120s);
    INFO(dead.output());
    REQUIRE(dead_ready);
    Driver live({"aws", "--endpoint", fake.endpoint()});
    auto live_ready = live.line("ready ", 120s);
    INFO(live.output());
    REQUIRE(live_ready);
    const std::string dead_pool = pool_of(*dead_ready), live_pool = pool_of(*live_ready);
    REQUIRE(::kill(dead.pid(), SIGKILL) == 0);
    check_killed_by(dead.wait(10s), SIGKILL, dead);
    CHECK(live_instances(fake, dead_pool) == 1);  // a client killed -9 leaves its instance
    CHECK(live_instances(fake, live_pool) == 1);

    auto ls = sky_cli({"ls"});
    INFO(ls.output);
    CHECK(ls.status == 0);
    CHECK(ls.output.find("owner gone") != std::string::npos);
    CHECK(ls.output.find(kSecret) == std::string::npos);

    const auto t0 = Clock::now();
    auto gc = sky_cli({"gc"});
    INFO(gc.output);
    CHECK(gc.status == 0);
    CHECK(Clock::now() - t0 < 60s);
    CHECK(gc.output.find(kSecret) == std::string::npos);
    CHECK(live_instances(fake, dead_pool) == 0);  // ended by gc, not by an idle timeout
    CHECK(live_instances(fake, live_pool) == 1);  // never touched
    // The dead client's key directory (its pool's SSH private key) went with the pool; the
    // running pool's stays.
    auto key_dirs = [](const std::string& pool) {
        int n = 0;
        for (const auto& e :
             std::filesystem::directory_iterator(std::filesystem::temp_directory_path()))
            if (e.path().filename().string().find("-" + pool + "-") != std::string::npos) ++n;
        return n;
    };
    CHECK(key_dirs(dead_pool) == 0);
    CHECK(key_dirs(live_pool) == 1);
    auto rec = ledger_of(dead_pool);
    REQUIRE(rec);
    CHECK(rec->closed);
    CHECK(rec->closed_by == "gc");
    CHECK_FALSE(ledger_of(live_pool)->closed);
    // The running pool still works and ends cleanly on its own signal.
    CHECK_FALSE(live.wait(0ms).has_value());
    REQUIRE(::kill(live.pid(), SIGINT) == 0);
    check_killed_by(live.wait(60s), SIGINT, live);
    CHECK(live_instances(fake) == 0);
}

TEST_CASE("signals: SIGINT while the pool is still provisioning over the fake EC2 leaves nothing",
          "[signals_aws]") {
    SKIP_WITHOUT_FAKE_EC2();
    TempHome home;
    sky::test::TestHosts hosts(2);
    sky::test::FakeEc2 fake(fake_options(&hosts));
    AwsEnv env(fake.endpoint());
    Driver d({"aws", "--nodes", "2", "--endpoint", fake.endpoint()});
    // As soon as the first instance is in the ledger (launched, not yet bootstrapped).
    REQUIRE(sky::test::wait_until(
        [] {
            for (const auto& r : sky::detail::Ledger::read_all())
                if (!r.instances.empty()) return true;
            return false;
        },
        60s));
    REQUIRE(::kill(d.pid(), SIGINT) == 0);
    check_killed_by(d.wait(90s), SIGINT, d);
    CHECK(live_instances(fake) == 0);
    const auto all = sky::detail::Ledger::read_all();
    REQUIRE(all.size() == 1);
    std::ifstream in(all[0].file);
    std::stringstream text;
    text << in.rdbuf();
    INFO("ledger:\n" << text.str() << "driver output:\n" << d.output());
    CHECK(all[0].closed);
    if (!all[0].live_instances().empty()) {
        // Known gap (reported): a launch that was in flight when the teardown began can be
        // terminated without its `gone` record. Nothing runs (checked above); gc settles it.
        WARN("ledger left with ids not recorded gone:\n" << text.str());
        auto gc = sky_cli({"gc"});
        INFO(gc.output);
        CHECK(gc.status == 0);
        CHECK(ledger_of(all[0].pool_id)->live_instances().empty());
    }
    CHECK(sky::test::wait_until([] { return sky::test::remote_workers() == 0; }, 10s));
}

TEST_CASE(
    "signals: sky gc never touches a pool whose client runs in its own PID namespace with the "
    "same host name and home, and collects it once the client is killed",
    "[signals]") {
    if (::geteuid() != 0 || !fs::exists("/usr/bin/unshare")) {
        WARN("skipped: a client in its own PID namespace needs root and /usr/bin/unshare");
        return;
    }
    TempHome home;
    // As `docker run --uts=host -v $HOME:$HOME`: another PID namespace, the same host name and
    // home. --kill-child: the namespace dies with the unshare process.
    Driver d({"simulated"}, {},
             {"/usr/bin/unshare", "--pid", "--fork", "--mount-proc", "--kill-child"});
    auto ready = d.line("ready ", 60s);
    INFO(d.output());
    REQUIRE(ready);
    const std::string pool = pool_of(*ready);
    auto rec = ledger_of(pool);
    REQUIRE(rec);
    CHECK(rec->host == sky::detail::this_host());
    CHECK(rec->pid_namespace != sky::detail::this_pid_namespace());
    CHECK(rec->owner_pid != d.pid());  // a pid of its own namespace: meaningless here
    CHECK(rec->owner() == sky::detail::LedgerRecord::Owner::alive);

    auto gc = sky_cli({"gc"});
    INFO(gc.output);
    CHECK(gc.status == 0);
    CHECK(gc.output.find("pool " + pool) != std::string::npos);
    CHECK(gc.output.find("running: left alone") != std::string::npos);
    CHECK(gc.output.find("terminating") == std::string::npos);
    CHECK_FALSE(ledger_of(pool)->closed);
    CHECK_FALSE(d.wait(0ms).has_value());  // its call still runs on its machine
    auto ls = sky_cli({"ls", "--provider", "simulated"});
    INFO(ls.output);
    CHECK(ls.output.find(pool) != std::string::npos);

    // Killed with its namespace: the kernel drops the lock, gc collects the pool.
    REQUIRE(::kill(d.pid(), SIGKILL) == 0);
    REQUIRE(d.wait(10s).has_value());
    CHECK(sky::test::wait_until(
        [&] { return ledger_of(pool)->owner() == sky::detail::LedgerRecord::Owner::dead; },
        std::chrono::seconds(10)));
    gc = sky_cli({"gc"});
    INFO(gc.output);
    CHECK(gc.status == 0);
    rec = ledger_of(pool);
    REQUIRE(rec);
    CHECK(rec->closed);
    CHECK(rec->closed_by == "gc");
}

TEST_CASE(
    "signals: sky gc believes only simulated machine records this user alone could have "
    "written",
    "[signals]") {
    TempHome home;
    const fs::path dir = home.dir / "simulated";
    // A process of this user that a planted record names: `sky gc --include-unknown` must not
    // kill it unless the record is this user's own.
    auto plant = [&](const std::string& id, pid_t victim) {
        fs::create_directories(dir);
        ::chmod(dir.c_str(), 0700);
        const std::string identity = sky::detail::process_identity(victim);
        std::ofstream out(dir / (id + ".json"));
        out << "{\"id\":\"" << id << "\",\"pool\":\"0badc0de\",\"instance_type\":\"t3\","
            << "\"node\":0,\"spot\":false,\"owner_pid\":" << victim << ",\"owner_start\":\""
            << identity << "\",\"worker_pid\":" << victim << ",\"worker_start\":\"" << identity
            << "\"}\n";
        out.close();
        ::chmod((dir / (id + ".json")).c_str(), 0600);
        return dir / (id + ".json");
    };
    auto victim = [] {
        pid_t pid = -1;
        char* argv[] = {const_cast<char*>("/bin/sleep"), const_cast<char*>("120"), nullptr};
        REQUIRE(::posix_spawn(&pid, "/bin/sleep", nullptr, nullptr, argv, environ) == 0);
        return pid;
    };
    auto collect = [] { return sky_cli({"gc", "--provider", "simulated", "--include-unknown"}); };
    struct Reaped {
        pid_t pid;
        ~Reaped() {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, nullptr, 0);
        }
    };
    SECTION("in a directory others can write") {
        Reaped v{victim()};
        plant("sim-0badc0de-0001", v.pid);
        ::chmod(dir.c_str(), 0777);
        auto gc = collect();
        INFO(gc.output);
        CHECK(running(v.pid));
    }
    SECTION("a file others can write") {
        Reaped v{victim()};
        ::chmod(plant("sim-0badc0de-0002", v.pid).c_str(), 0666);
        auto gc = collect();
        INFO(gc.output);
        CHECK(running(v.pid));
    }
    SECTION("a symbolic link to a record elsewhere") {
        Reaped v{victim()};
        const fs::path real = plant("sim-0badc0de-0003", v.pid);
        fs::rename(real, home.dir / "elsewhere.json");
        fs::create_symlink(home.dir / "elsewhere.json", real);
        auto gc = collect();
        INFO(gc.output);
        CHECK(running(v.pid));
    }
    SECTION("another user's file (root only)") {
        if (::geteuid() != 0) return;
        Reaped v{victim()};
        REQUIRE(::chown(plant("sim-0badc0de-0004", v.pid).c_str(), 65534, 65534) == 0);
        auto gc = collect();
        INFO(gc.output);
        CHECK(running(v.pid));
    }
    SECTION("control: this user's own private record is believed") {
        Reaped v{victim()};
        plant("sim-0badc0de-0005", v.pid);
        auto gc = collect();
        INFO(gc.output);
        CHECK(sky::test::wait_until([&] { return !running(v.pid); }, std::chrono::seconds(10)));
    }
}

// ---- SIGINT during a call, on every provider the tests reach ----
//
// The driver with --catch: the call's CancelledError unwinds the function that owns the pool,
// whose handler holds references to that function's locals; the program then returns from main
// unless the teardown's SIGINT ends it first. It must die by SIGINT (not SIGSEGV, not an abort,
// not status 1), and no event may reach the handler after the pool's destructor returned
// (status 3).

namespace {

// Waits for "ready", lets the call start, sends SIGINT and checks the driver died by it.
void interrupt_during_call(Driver& d, std::chrono::seconds ready_limit) {
    auto ready = d.line("ready ", ready_limit);
    INFO(d.output());
    REQUIRE(ready);
    std::this_thread::sleep_for(500ms);  // the call is on its node
    REQUIRE(::kill(d.pid(), SIGINT) == 0);
    check_killed_by(d.wait(120s), SIGINT, d);
}

// The pool the driver printed: closed in the ledger with nothing left live.
void check_ledger_closed(const Driver& d) {
    const auto all = sky::detail::Ledger::read_all();
    INFO(d.output());
    REQUIRE(all.size() == 1);
    CHECK(all[0].closed);
    CHECK(all[0].live_instances().empty());
}

std::vector<std::string> ssh_args(const sky::test::TestHosts& h) {
    std::string hosts;
    for (int i = 0; i < h.size(); ++i) hosts += (i ? "," : "") + h.address(i);
    return {"ssh",
            "--nodes",
            std::to_string(h.size()),
            "--hosts",
            hosts,
            "--port",
            std::to_string(h.port(0)),
            "--identity",
            h.client_key_path().string(),
            "--known-hosts",
            h.known_hosts_file().string(),
            "--catch"};
}

// A REST cloud's fake on 2 test hosts: SIGINT during a call on a 2-node pool over it.
template <class Fake, class Options>
void interrupt_on_cloud(const std::string& provider,
                        std::vector<std::pair<std::string, std::string>> credentials,
                        const std::string& secret, Options options) {
    TempHome home;
    sky::test::CloudOnHosts<Fake> cloud(2, std::move(credentials), secret, std::move(options));
    Driver d({provider, "--nodes", "2", "--endpoint", cloud.fake.endpoint(), "--catch"});
    interrupt_during_call(d, 120s);
    cloud.check_nothing_left();
    check_ledger_closed(d);
}

}  // namespace

TEST_CASE(
    "signals: SIGINT during a call ends a program whose handler holds its locals by SIGINT: "
    "local",
    "[signals]") {
    for (int run = 0; run < 3; ++run) {  // the late event was seen in 2 of 3 runs
        INFO("run " << run);
        TempHome home;
        Driver d({"local", "--nodes", "2", "--catch"});
        auto ready = d.line("ready ", 60s);
        REQUIRE(ready);
        const auto workers = children_of(d.pid());
        std::this_thread::sleep_for(300ms);
        REQUIRE(::kill(d.pid(), SIGINT) == 0);
        check_killed_by(d.wait(30s), SIGINT, d);
        for (long w : workers) CHECK_FALSE(running(w));
        check_ledger_closed(d);
    }
}

TEST_CASE(
    "signals: SIGINT during a call ends a program whose handler holds its locals by SIGINT: "
    "simulated",
    "[signals]") {
    TempHome home;
    Driver d({"simulated", "--nodes", "2", "--catch"});
    interrupt_during_call(d, 60s);
    check_ledger_closed(d);
}

TEST_CASE(
    "signals: SIGINT during a call ends a program whose handler holds its locals by SIGINT: "
    "ssh test hosts",
    "[signals_hosts]") {
    SKIP_WITHOUT_HOSTS();
    TempHome home;
    sky::test::TestHosts hosts(2);
    Driver d(ssh_args(hosts));
    interrupt_during_call(d, 120s);
    check_ledger_closed(d);
    CHECK(sky::test::wait_until([] { return sky::test::remote_workers() == 0; }, 10s));
}

TEST_CASE(
    "signals: SIGINT during a call ends a program whose handler holds its locals by SIGINT: "
    "aws (fake EC2)",
    "[signals_aws]") {
    SKIP_WITHOUT_FAKE_EC2();
    for (int run = 0; run < 2; ++run) {  // the crash was seen in 3 of 3 runs
        INFO("run " << run);
        TempHome home;
        sky::test::TestHosts hosts(2);
        sky::test::FakeEc2 fake(fake_options(&hosts));
        AwsEnv env(fake.endpoint());
        Driver d({"aws", "--nodes", "2", "--endpoint", fake.endpoint(), "--catch"});
        interrupt_during_call(d, 120s);
        CHECK(live_instances(fake) == 0);
        check_ledger_closed(d);
        CHECK(sky::test::wait_until([] { return sky::test::remote_workers() == 0; }, 10s));
    }
}

TEST_CASE(
    "signals: SIGINT during a call ends a program whose handler holds its locals by SIGINT: "
    "runpod",
    "[signals_clouds]") {
    SKIP_WITHOUT_HOSTS();
    const std::string key = "rpa_SIGNALS_KEY_0A1B2C3D4E";
    interrupt_on_cloud<sky::test::FakeRunPod>("runpod", {{"RUNPOD_API_KEY", key}}, key,
                                              sky::test::FakeRunPodOptions{.api_key = key});
}

TEST_CASE(
    "signals: SIGINT during a call ends a program whose handler holds its locals by SIGINT: "
    "vastai",
    "[signals_clouds]") {
    SKIP_WITHOUT_HOSTS();
    const std::string key = "vast_signals_key_7e3f9a1c";
    interrupt_on_cloud<sky::test::FakeVast>("vastai", {{"VAST_API_KEY", key}}, key,
                                            sky::test::FakeVastOptions{.api_key = key});
}

TEST_CASE(
    "signals: SIGINT during a call ends a program whose handler holds its locals by SIGINT: "
    "verda",
    "[signals_clouds]") {
    SKIP_WITHOUT_HOSTS();
    const std::string id = "signals-client-id", secret = "verda_signals_secret_51f0";
    interrupt_on_cloud<sky::test::FakeVerda>(
        "verda", {{"VERDA_CLIENT_ID", id}, {"VERDA_CLIENT_SECRET", secret}}, secret,
        sky::test::FakeVerdaOptions{.client_id = id, .client_secret = secret});
}

TEST_CASE(
    "signals: SIGINT during a call ends a program whose handler holds its locals by SIGINT: "
    "digitalocean",
    "[signals_clouds]") {
    SKIP_WITHOUT_HOSTS();
    const std::string token = "dop_v1_signals_token_8c2e4b";
    interrupt_on_cloud<sky::test::FakeDigitalOcean>(
        "digitalocean", {{"DIGITALOCEAN_TOKEN", token}}, token,
        sky::test::FakeDigitalOceanOptions{.token = token});
}

TEST_CASE(
    "signals: after SIGKILL sky gc deletes what a dead DigitalOcean pool left: its droplets, "
    "key, tag and cloud firewall",
    "[signals_clouds]") {
    SKIP_WITHOUT_HOSTS();
    const std::string token = "dop_v1_signals_token_8c2e4b";
    TempHome home;
    sky::test::CloudOnHosts<sky::test::FakeDigitalOcean> cloud(
        2, {{"DIGITALOCEAN_TOKEN", token}}, token,
        sky::test::FakeDigitalOceanOptions{.token = token});
    auto& fake = cloud.fake;
    Driver d({"digitalocean", "--nodes", "2", "--endpoint", fake.endpoint()});
    auto ready = d.line("ready ", 120s);
    INFO(d.output());
    REQUIRE(ready);
    REQUIRE(::kill(d.pid(), SIGKILL) == 0);
    check_killed_by(d.wait(10s), SIGKILL, d);
    // A client killed -9 deletes nothing: its droplets, key, tag and firewall are all there.
    CHECK(fake.alive() == 2);
    CHECK(fake.keys().size() == 1);
    CHECK(fake.firewalls().size() == 1);
    const auto tags = fake.tags();
    CHECK(std::find(tags.begin(), tags.end(), "sky-pool-" + pool_of(*ready)) != tags.end());

    sky::test::ScopedEnv url({{"DIGITALOCEAN_API_URL", fake.endpoint()}});
    auto gc = sky_cli({"gc", "--provider", "digitalocean"});
    INFO(gc.output);
    CHECK(gc.status == 0);
    CHECK(gc.output.find(token) == std::string::npos);
    CHECK(sky::test::wait_until([&] { return fake.alive() == 0; }, 30s));
    CHECK(fake.keys().empty());
    CHECK(fake.firewalls().empty());
    auto rec = ledger_of(pool_of(*ready));
    REQUIRE(rec);
    CHECK(rec->closed);
    CHECK(rec->closed_by == "gc");
    CHECK(rec->live_instances().empty());
    CHECK(rec->infra_left.empty());
}

namespace {

// The Local workers a pool's ledger names ("local-<pid>").
std::vector<long> local_workers(const sky::detail::LedgerRecord& r) {
    std::vector<long> out;
    for (const auto& id : r.instances)
        if (id.rfind("local-", 0) == 0) out.push_back(std::stol(id.substr(6)));
    return out;
}

// Waits (bounded) until the pool's ledger names at least `n` machines.
std::optional<sky::detail::LedgerRecord> ledger_with(const std::string& pool, std::size_t n) {
    std::optional<sky::detail::LedgerRecord> r;
    sky::test::wait_until(
        [&] {
            r = ledger_of(pool);
            return r && r->instances.size() >= n;
        },
        20s);
    return r;
}

}  // namespace

TEST_CASE(
    "signals: SIGINT on an elastic pool that is waking or draining tears it down and leaves no "
    "worker",
    "[signals][elastic]") {
    TempHome home;
    SECTION("Local, a call just arrived on a pool of 0 nodes") {
        Driver d({"local", "--nodes", "0", "--elastic"});
        auto ready = d.line("ready ", 60s);
        REQUIRE(ready);
        CHECK(children_of(d.pid()).empty());  // a lazy start: no worker yet
        REQUIRE(d.line("waking", 20s));
        REQUIRE(::kill(d.pid(), SIGINT) == 0);
        check_killed_by(d.wait(30s), SIGINT, d);
        auto after = ledger_of(pool_of(*ready));
        REQUIRE(after);
        CHECK(after->closed);
        CHECK(after->live_instances().empty());
        for (long w : local_workers(*after)) CHECK_FALSE(running(w));
    }
    SECTION("Simulated, node 0 launched and still bootstrapping") {
        Driver d({"simulated", "--nodes", "0", "--elastic", "--slow-wake", "30000"});
        auto ready = d.line("ready ", 60s);
        REQUIRE(ready);
        REQUIRE(d.line("waking", 20s));
        // The woken machine is launched (in the ledger) and not ready for 30 s.
        REQUIRE(ledger_with(pool_of(*ready), 1));
        REQUIRE(::kill(d.pid(), SIGINT) == 0);
        check_killed_by(d.wait(30s), SIGINT, d);
        auto after = ledger_of(pool_of(*ready));
        REQUIRE(after);
        CHECK(after->closed);
        CHECK(after->live_instances().empty());
    }
    SECTION("Local, both nodes draining, one running its call") {
        Driver d({"local", "--nodes", "2", "--elastic", "--drain"});
        auto ready = d.line("ready ", 60s);
        REQUIRE(ready);
        REQUIRE(d.line("draining", 40s));
        // Its two workers, as the ledger names them (the idle one may have ended already).
        const auto started = ledger_with(pool_of(*ready), 2);
        REQUIRE(started);
        const auto workers = local_workers(*started);
        REQUIRE(workers.size() == 2);
        std::this_thread::sleep_for(300ms);  // the idle one ends, the busy one drains
        REQUIRE(::kill(d.pid(), SIGINT) == 0);
        check_killed_by(d.wait(30s), SIGINT, d);
        for (long w : workers) CHECK_FALSE(running(w));
        auto after = ledger_of(pool_of(*ready));
        REQUIRE(after);
        CHECK(after->closed);
        CHECK(after->live_instances().empty());
    }
}

TEST_CASE("signals: after SIGKILL of a waking or draining elastic pool, sky gc leaves nothing",
          "[signals][elastic]") {
    TempHome home;
    SECTION("Simulated, waking") {
        Driver d({"simulated", "--nodes", "0", "--elastic", "--slow-wake", "30000"});
        auto ready = d.line("ready ", 60s);
        REQUIRE(ready);
        REQUIRE(d.line("waking", 20s));
        REQUIRE(ledger_with(pool_of(*ready), 1));
        REQUIRE(::kill(d.pid(), SIGKILL) == 0);
        check_killed_by(d.wait(10s), SIGKILL, d);
        auto gc = sky_cli({"gc"});
        INFO(gc.output);
        CHECK(gc.status == 0);
        auto rec = ledger_of(pool_of(*ready));
        REQUIRE(rec);
        CHECK(rec->closed);
        CHECK(rec->closed_by == "gc");
        CHECK(rec->live_instances().empty());
    }
    SECTION("Local, draining") {
        Driver d({"local", "--nodes", "2", "--elastic", "--drain"});
        auto ready = d.line("ready ", 60s);
        REQUIRE(ready);
        REQUIRE(d.line("draining", 40s));
        // Its two workers, as the ledger names them (the idle one may have ended already).
        const auto started = ledger_with(pool_of(*ready), 2);
        REQUIRE(started);
        const auto workers = local_workers(*started);
        REQUIRE(workers.size() == 2);
        REQUIRE(::kill(d.pid(), SIGKILL) == 0);
        check_killed_by(d.wait(10s), SIGKILL, d);
        auto gc = sky_cli({"gc", "--provider", "local"});
        INFO(gc.output);
        CHECK(gc.status == 0);
        CHECK(sky::test::wait_until(
            [&] {
                for (long w : workers)
                    if (running(w)) return false;
                return true;
            },
            10s));
        auto rec = ledger_of(pool_of(*ready));
        REQUIRE(rec);
        CHECK(rec->closed);
        CHECK(rec->live_instances().empty());
    }
}
