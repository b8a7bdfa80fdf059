// examples/custom_provider end to end: the example program, as a user builds it, runs as a child
// process against the fake inventory, whose machines are SSH test hosts (needs root; skipped
// otherwise). It must run its pool, release every claim, fail with a ProvisionError when the
// fleet is full, and, killed with SIGKILL, leave claims that only its --release collects.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "fakes/fleet/fake_fleet.hpp"
#include "hosts/test_hosts.hpp"

extern char** environ;

namespace fs = std::filesystem;
using sky::test::FakeFleet;
using sky::test::TestHosts;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

const std::string kToken = "fleet-e2e-Vb3XkTOKEN-do-not-print";

// Two cheap machines the pool uses, one dearer of another type it never needs.
FakeFleet make_fleet(TestHosts& hosts) {
    sky::test::FakeFleetOptions o;
    o.token = kToken;
    o.hosts = &hosts;
    o.machines = {
        {.id = "small-0", .type = "lab-cpu-8", .vcpus = 8, .hourly_price = 0.10, .host = 0},
        {.id = "small-1", .type = "lab-cpu-8", .vcpus = 8, .hourly_price = 0.10, .host = 1},
        {.id = "big-0", .type = "lab-cpu-32", .vcpus = 32, .hourly_price = 0.40, .host = 2},
    };
    return FakeFleet(o);
}

// A scratch directory: the child's SKY_HOME (its pool ledgers) and its output files.
struct Scratch {
    fs::path dir;
    Scratch() {
        char tmpl[] = "/tmp/sky-custom-provider-XXXXXX";
        REQUIRE(::mkdtemp(tmpl) != nullptr);
        dir = tmpl;
    }
    ~Scratch() {
        std::error_code ec;
        fs::remove_all(dir, ec);
    }
};

std::string read_file(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// The example program (or the sky CLI) as a child process, stdout and stderr in files, its
// environment this process's with FLEET_URL, FLEET_TOKEN and SKY_HOME set. SIGKILLed and reaped
// whatever happens.
class Child {
public:
    Child(const std::string& program, std::vector<std::string> args, const FakeFleet& fleet,
          const Scratch& scratch, const std::string& name, const std::string& token = kToken)
        : out_(scratch.dir / (name + ".out")), err_(scratch.dir / (name + ".err")) {
        std::vector<std::string> argv_s = {program};
        argv_s.insert(argv_s.end(), args.begin(), args.end());
        std::vector<char*> argv;
        for (auto& a : argv_s) argv.push_back(a.data());
        argv.push_back(nullptr);
        std::vector<std::string> env_s;
        for (char** e = environ; e && *e; ++e) {
            const std::string v = *e;
            if (v.rfind("FLEET_", 0) == 0 || v.rfind("SKY_HOME=", 0) == 0) continue;
            env_s.push_back(v);
        }
        env_s.push_back("FLEET_URL=" + fleet.url());
        env_s.push_back("FLEET_TOKEN=" + token);
        env_s.push_back("SKY_HOME=" + (scratch.dir / "home").string());
        std::vector<char*> envp;
        for (auto& e : env_s) envp.push_back(e.data());
        envp.push_back(nullptr);
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 1, out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        posix_spawn_file_actions_addopen(&fa, 2, err_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        const int rc = ::posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), envp.data());
        posix_spawn_file_actions_destroy(&fa);
        REQUIRE(rc == 0);
    }
    ~Child() {
        if (pid_ > 0 && !reaped_) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
        }
    }
    Child(const Child&) = delete;
    Child& operator=(const Child&) = delete;

    // Waits (bounded) for the child to end: its exit status, -SIGNAL when a signal ended it,
    // nullopt when it still runs at the limit.
    std::optional<int> wait(std::chrono::seconds limit) {
        const auto until = Clock::now() + limit;
        for (;;) {
            int st = 0;
            if (::waitpid(pid_, &st, WNOHANG) == pid_) {
                reaped_ = true;
                return WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
            }
            if (Clock::now() >= until) return std::nullopt;
            std::this_thread::sleep_for(20ms);
        }
    }
    void kill(int sig) const { ::kill(pid_, sig); }
    [[nodiscard]] std::string out() const { return read_file(out_); }
    [[nodiscard]] std::string err() const { return read_file(err_); }
    [[nodiscard]] std::string both() const { return "stdout:\n" + out() + "\nstderr:\n" + err(); }

private:
    fs::path out_, err_;
    pid_t pid_ = -1;
    bool reaped_ = false;
};

Child example(std::vector<std::string> args, const FakeFleet& fleet, const Scratch& scratch,
              const std::string& name) {
    return Child(SKY_CUSTOM_PROVIDER, std::move(args), fleet, scratch, name);
}

bool contains(const std::string& text, const std::string& what) {
    return text.find(what) != std::string::npos;
}

void check_every_request_authorized(FakeFleet& fleet) {
    auto log = fleet.http().requests();
    REQUIRE_FALSE(log.empty());
    for (const auto& r : log) {
        INFO(r.method << " " << r.target);
        CHECK(r.header("Authorization") == "Bearer " + kToken);
    }
}

// Machines the inventory has handed out (to anyone) and not taken back.
int claimed(const FakeFleet& fleet) { return fleet.claimed(); }

}  // namespace

TEST_CASE("custom provider: the example runs a 2-node pool on the fleet and releases it",
          "[e2e][custom_provider][hosts]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(3);
    FakeFleet fleet = make_fleet(hosts);
    Scratch scratch;
    Child c = example({}, fleet, scratch, "run");
    auto status = c.wait(240s);
    INFO(c.both());
    REQUIRE(status.has_value());
    CHECK(*status == 0);

    const std::string out = c.out();
    CHECK(out.rfind("pool ", 0) == 0);
    CHECK(contains(out, "machine small-0@c"));
    CHECK(contains(out, "machine small-1@c"));
    CHECK(contains(out, "(lab-cpu-8, " + hosts.address(0) + ")"));
    CHECK(contains(out, "broadcast: node 0 of 2 on "));
    CHECK(contains(out, "broadcast: node 1 of 2 on "));
    CHECK(contains(out, "gather: sum of squares 1..100 = 338350"));
    CHECK_FALSE(contains(c.both(), kToken));

    // The inventory saw the token on every request; the cheap type served the pool, the other
    // type was never claimed; every claim was released, and nothing runs on the machines.
    check_every_request_authorized(fleet);
    for (const auto& m : fleet.machines()) {
        INFO(m.id);
        CHECK(m.state == "free");
        CHECK(m.claims == (m.type == "lab-cpu-8" ? 1 : 0));
        CHECK(m.releases == m.claims);
        if (m.claims) CHECK(contains(m.boot_script, "<<'SKY_HOST_KEY'"));
        if (m.claims) CHECK(m.public_key.rfind("ssh-ed25519 ", 0) == 0);
    }
    CHECK(sky::test::remote_workers() == 0);
}

TEST_CASE("custom provider: a full fleet fails the pool with a ProvisionError listing both types",
          "[e2e][custom_provider][hosts]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(3);
    FakeFleet fleet = make_fleet(hosts);
    Scratch scratch;

    SECTION("every machine is claimed already") {
        for (const char* id : {"small-0", "small-1", "big-0"})
            fleet.claim_for_someone_else(id, "thesis-run");
        Child c = example({}, fleet, scratch, "full");
        auto status = c.wait(120s);
        INFO(c.both());
        REQUIRE(status.has_value());
        CHECK(*status == 1);
        const std::string err = c.err();
        CHECK(contains(err, "sky::ProvisionError (2 attempts)"));
        CHECK(contains(err, "every lab-cpu-8 machine is claimed (2 in the inventory)"));
        CHECK(contains(err, "every lab-cpu-32 machine is claimed (1 in the inventory)"));
        CHECK_FALSE(contains(c.both(), kToken));
        for (const auto& m : fleet.machines()) {
            CHECK(m.pool == "thesis-run");  // nobody else's claim is touched
            CHECK(m.claims == 1);
        }
        CHECK(fleet.http().count("POST", "/v1/machines/{id}/claim") == 0);
        check_every_request_authorized(fleet);
    }

    SECTION("the only free type has too few machines: what it claimed is released") {
        fleet.claim_for_someone_else("small-0", "thesis-run");
        fleet.claim_for_someone_else("small-1", "thesis-run");
        Child c = example({}, fleet, scratch, "partial");
        auto status = c.wait(120s);
        INFO(c.both());
        REQUIRE(status.has_value());
        CHECK(*status == 1);
        CHECK(contains(c.err(), "sky::ProvisionError (2 attempts)"));
        CHECK(contains(c.err(), "every lab-cpu-32 machine is claimed (1 in the inventory)"));
        auto machines = fleet.machines();
        REQUIRE(machines.size() == 3);
        CHECK(machines[2].claims == 1);  // big-0: claimed for node 0, then released
        CHECK(machines[2].releases == 1);
        CHECK(machines[2].state == "free");
        CHECK(claimed(fleet) == 2);  // the other user's two
    }
    CHECK(sky::test::remote_workers() == 0);
}

TEST_CASE(
    "custom provider: a client killed with SIGKILL leaves its machines claimed until "
    "--release",
    "[e2e][custom_provider][hosts]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(3);
    FakeFleet fleet = make_fleet(hosts);
    Scratch scratch;
    std::string pool;
    {
        Child c = example({}, fleet, scratch, "killed");
        // Killed while its pool starts: both machines claimed, the nodes being bootstrapped.
        const auto until = Clock::now() + 120s;
        while (claimed(fleet) < 2 && Clock::now() < until && !c.wait(0s))
            std::this_thread::sleep_for(20ms);
        INFO(c.both());
        REQUIRE(claimed(fleet) == 2);
        c.kill(SIGKILL);
        REQUIRE(c.wait(10s) == -SIGKILL);
    }
    auto machines = fleet.machines();
    REQUIRE(machines[0].pool.rfind("sky-", 0) == 0);
    pool = machines[0].pool.substr(4);
    CHECK(machines[1].pool == machines[0].pool);

    // Nothing releases them on its own: the inventory only knows claims.
    std::this_thread::sleep_for(2s);
    CHECK(claimed(fleet) == 2);

    // `sky gc` finds the pool's ledger but cannot reach a provider that a program defined.
    {
        Child gc(SKY_CLI_PATH, {"gc"}, fleet, scratch, "gc");
        auto status = gc.wait(120s);
        INFO(gc.both());
        REQUIRE(status.has_value());
        CHECK(*status == 1);
        CHECK(contains(gc.err(), pool));
        CHECK(contains(gc.err(), "'fleet' is a provider its program defined"));
        CHECK(claimed(fleet) == 2);
    }

    // The example's own collector needs nothing but the pool id.
    Child release = example({"--release", pool}, fleet, scratch, "release");
    auto status = release.wait(60s);
    INFO(release.both());
    REQUIRE(status.has_value());
    CHECK(*status == 0);
    CHECK(contains(release.out(), "released 2 machine(s) of pool " + pool));
    CHECK(claimed(fleet) == 0);
    for (const auto& m : fleet.machines()) CHECK(m.releases == m.claims);
    CHECK(sky::test::remote_workers() == 0);
    check_every_request_authorized(fleet);
    // The killed client's key directory stays behind (`sky gc` removes it for built-in providers
    // only, docs/cleanup.md): the test removes it.
    std::error_code ec;
    for (auto& e : fs::directory_iterator(fs::temp_directory_path(), ec))
        if (e.path().filename().string().rfind("sky-fleet-" + pool + "-", 0) == 0)
            fs::remove_all(e.path(), ec);
}

TEST_CASE(
    "custom provider: a wrong token ends the program with the inventory's answer, never "
    "the token",
    "[e2e][custom_provider]") {
    // No test hosts needed: the pool fails at its first request.
    sky::test::FakeFleetOptions o;
    o.token = kToken;
    o.machines = {{.id = "small-0", .type = "lab-cpu-8", .address = "192.0.2.1"}};
    FakeFleet fleet(o);
    Scratch scratch;
    const std::string wrong = "wrong-token-Hq7PzNOTPRINTED";
    Child c(SKY_CUSTOM_PROVIDER, {}, fleet, scratch, "token", wrong);
    auto status = c.wait(60s);
    INFO(c.both());
    REQUIRE(status.has_value());
    CHECK(*status == 1);
    CHECK(contains(c.err(), "fleet: GET /v1/machines: HTTP 401: a valid bearer token is required"));
    CHECK_FALSE(contains(c.both(), wrong));
    CHECK_FALSE(contains(c.both(), kToken));
    CHECK(fleet.http().count("POST", "/*") == 0);
    for (const auto& r : fleet.http().requests())
        CHECK(r.header("Authorization") == "Bearer " + wrong);
}
