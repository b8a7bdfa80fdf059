// sky::SSH end to end: 4 test hosts, each a network namespace with its own address and sshd.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <mutex>
#include <set>
#include <thread>

#include "hosts/ssh_provider.hpp"
#include "hosts/test_hosts.hpp"
#include "sky/sky.hpp"

extern char** environ;
using sky::test::TestHosts;

namespace ssh_pool {

int node_index() { return sky::instance_info().node; }
sky::InstanceInfo info() { return sky::instance_info(); }
int add(int a, int b) { return a + b; }
int talk(int n) {
    for (int i = 0; i < n; ++i) std::cout << "remote line " << i << std::endl;
    return n;
}
int fail(int x) { throw std::out_of_range("remote failure " + std::to_string(x)); }
int sleep_ms(int ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    return sky::instance_info().node;
}
std::string getenv_of(std::string k) {
    const char* v = std::getenv(k.c_str());
    return v ? v : "<unset>";
}
std::vector<float> echo(std::vector<float> v) { return v; }
int die() {
    ::raise(SIGKILL);
    return -1;
}

sky::PoolSpec spec_for(const TestHosts& h, int nodes) {
    sky::SSH ssh = sky::test::ssh_provider(h);
    return {.provider = ssh, .nodes = nodes, .display = sky::Display::quiet};
}

// A client that is SIGKILLed while its pool runs (the watchdog test). Reads hosts from a file.
int orphan_client(const char* spec_file) {
    std::ifstream f(spec_file);
    sky::SSH ssh;
    std::string host;
    f >> ssh.identity_file >> ssh.known_hosts >> ssh.port;
    while (f >> host) ssh.hosts.push_back(host);
    sky::ComputePool pool{{.provider = ssh,
                           .nodes = static_cast<int>(ssh.hosts.size()),
                           .idle_timeout = std::chrono::seconds(3),
                           .display = sky::Display::quiet}};
    sky::compute<add>(1, 1) | pool;
    // Killed in the middle of a ten-minute call on every node.
    std::vector<sky::Future<int>> calls;
    for (std::size_t i = 0; i < ssh.hosts.size(); ++i)
        calls.push_back(pool.submit(sky::compute<sleep_ms>(600000)));
    std::this_thread::sleep_for(std::chrono::seconds(1));
    std::ofstream(std::string(spec_file) + ".ready") << "ready\n";
    std::this_thread::sleep_for(std::chrono::seconds(120));
    return 0;
}

}  // namespace ssh_pool

using namespace ssh_pool;

TEST_CASE("ssh pool: every operator on 4 hosts, with distinct nodes and remote output",
          "[ssh_pool]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(4);
    std::mutex m;
    std::vector<std::string> lines;
    std::set<std::string> steps;
    auto spec = spec_for(hosts, 4);
    spec.env = {{"SKY_SSH_TEST", "yes"}};
    spec.on_event = [&](const sky::Event& e) -> std::optional<sky::Event> {
        std::lock_guard lk(m);
        if (auto* l = std::get_if<sky::LogLine>(&e)) lines.push_back(l->line);
        if (auto* b = std::get_if<sky::BootstrapProgress>(&e)) steps.insert(b->step);
        return std::nullopt;
    };
    {
        sky::ComputePool pool{spec};
        CHECK((sky::compute<add>(2, 3) >> pool) == 5);
        auto infos = sky::compute<info>() | pool;
        REQUIRE(infos.size() == 4);
        for (int i = 0; i < 4; ++i) {
            CHECK(infos[static_cast<std::size_t>(i)].node == i);
            CHECK(infos[static_cast<std::size_t>(i)].total_nodes == 4);
            CHECK(infos[static_cast<std::size_t>(i)].head_addr == hosts.address(0));
        }
        auto [a, b] = (sky::compute<add>(1, 1) & sky::compute<getenv_of>("SKY_SSH_TEST")) >> pool;
        CHECK(a == 2);
        CHECK(b == "yes");
        std::vector<sky::PendingCompute<int>> many;
        for (int i = 0; i < 200; ++i) many.push_back(sky::compute<add>(i, i));
        auto out = sky::gather(std::move(many)) >> pool;
        for (int i = 0; i < 200; ++i) CHECK(out[static_cast<std::size_t>(i)] == 2 * i);
        CHECK((sky::compute<talk>(3) >> pool) == 3);
        try {
            sky::compute<fail>(7) >> pool;
            FAIL("no exception");
        } catch (const sky::RemoteError& e) {
            CHECK(e.type_name() == "std::out_of_range");
            CHECK(e.message() == "remote failure 7");
        }
        std::vector<float> big(4 << 20, 2.5f);
        CHECK((sky::compute<echo>(big) >> pool) == big);
        auto inst = pool.instances();
        REQUIRE(inst.size() == 4);
        std::set<std::string> ips;
        for (auto& i : inst) ips.insert(i.public_ip.value_or(""));
        CHECK(ips.size() == 4);
        CHECK(sky::test::remote_workers() == 4);
    }
    std::lock_guard lk(m);
    CHECK(std::count(lines.begin(), lines.end(), "remote line 2") == 1);
    for (const char* s : {"check", "env", "worker"}) CHECK(steps.count(s) == 1);
    CHECK(sky::test::wait_until([] { return sky::test::remote_workers() == 0; },
                                std::chrono::seconds(10)));
}

TEST_CASE("ssh pool: a second pool reuses the uploaded program", "[ssh_pool]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(2);
    for (int round = 0; round < 2; ++round) {
        std::mutex m;
        std::multiset<std::string> steps;
        auto spec = spec_for(hosts, 2);
        spec.on_event = [&](const sky::Event& e) -> std::optional<sky::Event> {
            std::lock_guard lk(m);
            if (auto* b = std::get_if<sky::BootstrapProgress>(&e)) steps.insert(b->step);
            return std::nullopt;
        };
        {
            sky::ComputePool pool{spec};
            CHECK((sky::compute<add>(1, 2) >> pool) == 3);
        }
        std::lock_guard lk(m);
        if (round == 1) {
            CHECK(steps.count("cached") == 2);
            CHECK(steps.count("upload") == 0);
        }
    }
}

TEST_CASE("ssh pool: a host key that does not match is refused", "[ssh_pool]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(2);
    // Swap the keys: each address pinned to the other host's key.
    std::string wrong = hosts.address(0) + " " + hosts.host_public_key(1) + "\n" +
                        hosts.address(1) + " " + hosts.host_public_key(0) + "\n";
    auto path = hosts.dir() / "wrong_known_hosts";
    std::ofstream(path) << wrong;
    auto spec = spec_for(hosts, 2);
    std::get<sky::SSH>(const_cast<sky::Provider::Config&>(spec.provider.config())).known_hosts =
        path.string();
    try {
        sky::ComputePool pool{spec};
        FAIL("the pool started with a wrong host key");
    } catch (const sky::Error& e) {
        std::string what = e.what();
        bool names_a_key = what.find(hosts.host_key_fingerprint(0)) != std::string::npos ||
                           what.find(hosts.host_key_fingerprint(1)) != std::string::npos;
        INFO(what);
        CHECK(names_a_key);
    }
    CHECK(sky::test::remote_workers() == 0);
}

TEST_CASE("ssh pool: a bad apt package is a BootstrapError naming the phase", "[ssh_pool]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(1);
    auto spec = spec_for(hosts, 1);
    spec.image.apt = {"sky-no-such-package-xyz"};
    try {
        sky::ComputePool pool{spec};
        FAIL("bootstrap succeeded");
    } catch (const sky::BootstrapError& e) {
        CHECK(e.phase() == "apt");
        CHECK(e.node() == 0);
        CHECK_FALSE(e.output().empty());
    }
    CHECK(sky::test::remote_workers() == 0);
}

TEST_CASE("ssh pool: losing a node mid-call fails that call, the others finish", "[ssh_pool]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(4);
    sky::ComputePool pool{spec_for(hosts, 4)};
    std::vector<sky::Future<int>> calls;
    for (int i = 0; i < 4; ++i) calls.push_back(pool.submit(sky::compute<sleep_ms>(1500)));
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    hosts.kill_all_processes(1);  // sshd and the worker of host 1
    int ok = 0, lost = 0;
    for (auto& f : calls) {
        try {
            f.get();
            ++ok;
        } catch (const sky::NodeLostError& e) {
            CHECK(e.node() == 1);
            ++lost;
        }
    }
    CHECK(lost == 1);
    CHECK(ok == 3);
    // The pool goes on with the other nodes.
    std::vector<sky::PendingCompute<int>> more;
    for (int i = 0; i < 20; ++i) more.push_back(sky::compute<add>(i, 1));
    CHECK((sky::gather(std::move(more)) >> pool).size() == 20);
}

TEST_CASE("ssh pool: hosts without sftp get the program through exec and serve calls",
          "[ssh_pool]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(2, {.sftp = false});
    const auto t0 = std::chrono::steady_clock::now();
    sky::ComputePool pool{spec_for(hosts, 2)};
    auto sums = sky::gather(std::vector{sky::compute<add>(1, 2), sky::compute<add>(3, 4)}) >> pool;
    CHECK(sums == std::vector{3, 7});
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(120));
    // Nothing half-written lies in the hosts' program store.
    for (int i = 0; i < 2; ++i) {
        auto r = sky::test::run_command(
            {"bash", "-c",
             "find " + hosts.host_path(i, "/root").string() + " -name '*.sky-part.*'"});
        CHECK(r.output.empty());
    }
}

TEST_CASE("ssh pool: a worker that never sends its hello fails the start within the bound",
          "[ssh_pool]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(1);
    auto spec = spec_for(hosts, 1);
    spec.idle_timeout = std::chrono::seconds(5);  // the hello bound: idle_timeout, 5 s to 60 s
    spec.env = {{"SKY_E2E_SILENT_WORKER", "1"}};
    const auto t0 = std::chrono::steady_clock::now();
    try {
        sky::ComputePool pool{spec};
        FAIL("a pool started with a worker that never spoke");
    } catch (const sky::Error& e) {
        CHECK_THAT(e.what(), Catch::Contains("within 5 s"));
    }
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60));
}

TEST_CASE("ssh pool: the workers of a client SIGKILLed mid-call end", "[ssh_pool]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(2);
    std::string spec_file = (hosts.dir() / "orphan-spec").string();
    {
        std::ofstream f(spec_file);
        f << hosts.client_key_path().string() << " " << hosts.known_hosts_file().string() << " "
          << hosts.port(0);
        for (int i = 0; i < hosts.size(); ++i) f << " " << hosts.address(i);
        f << "\n";
    }
    char buf[4096];
    auto n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
    std::string exe(buf, static_cast<std::size_t>(n));
    char* argv[] = {exe.data(), const_cast<char*>("--orphan-ssh-client"), spec_file.data(),
                    nullptr};
    pid_t client = 0;
    REQUIRE(::posix_spawn(&client, exe.c_str(), nullptr, nullptr, argv, environ) == 0);
    bool ready = sky::test::wait_until(
        [&] { return std::filesystem::exists(spec_file + ".ready"); }, std::chrono::seconds(60));
    REQUIRE(ready);
    CHECK(sky::test::remote_workers() == 2);
    ::kill(client, SIGKILL);
    int st;
    ::waitpid(client, &st, 0);
    // The connection ends with the client: the workers leave their ten-minute calls at once
    // (idle_timeout, 3 s, bounds it where the end of the connection is not seen).
    const auto t0 = std::chrono::steady_clock::now();
    CHECK(sky::test::wait_until([] { return sky::test::remote_workers() == 0; },
                                std::chrono::seconds(20)));
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
    auto runs = sky::test::run_command({"bash", "-c", "ls -A /root/.sky/run 2>/dev/null | wc -l"});
    INFO(runs.output);
}

TEST_CASE("ssh pool: a node cut off mid-call stops within idle_timeout, the call fails typed",
          "[ssh_pool]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(1);
    auto spec = spec_for(hosts, 1);
    spec.idle_timeout = std::chrono::seconds(3);
    sky::ComputePool pool{spec};
    auto call = pool.submit(sky::compute<sleep_ms>(600000));
    std::this_thread::sleep_for(std::chrono::seconds(1));
    REQUIRE(sky::test::remote_workers() == 1);
    // A silent partition: no FIN, no RST; both ends must find out by themselves.
    hosts.set_link_up(0, false);
    const auto t0 = std::chrono::steady_clock::now();
    CHECK(sky::test::wait_until([] { return sky::test::remote_workers() == 0; },
                                std::chrono::seconds(20)));
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(8));
    // The client's heartbeat bound (4 x 1 s + 5 s) ends the call with a typed error.
    REQUIRE(call.wait_for(std::chrono::seconds(30)));
    CHECK_THROWS_AS(call.get(), sky::NodeLostError);
    hosts.set_link_up(0, true);
}

TEST_CASE("ssh pool: the node's own watchdog ends a worker that stopped answering", "[ssh_pool]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(1);
    auto spec = spec_for(hosts, 1);
    spec.idle_timeout = std::chrono::seconds(3);
    sky::ComputePool pool{spec};
    CHECK((sky::compute<add>(1, 1) >> pool) == 2);
    REQUIRE(sky::test::remote_workers() == 1);
    // Freeze the worker (its own idle check with it): only the separate watchdog process, which
    // no longer sees the heartbeat file change, can end it.
    auto r =
        sky::test::run_command({"pkill", "-STOP", "-f", "^/[^ ]*/\\.sky/prog/[^ ]* --sky-worker"});
    CHECK(r.status == 0);
    CHECK(sky::test::wait_until([] { return sky::test::remote_workers() == 0; },
                                std::chrono::seconds(20)));
}

TEST_CASE("ssh pool: a node whose C library is too old is refused before anything runs",
          "[ssh_pool]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(1);
    // The host's home is its own: give its shell an `ldd` that reports an old glibc.
    auto spec = spec_for(hosts, 1);
    std::string setup =
        "mkdir -p ~/bin && printf '#!/bin/sh\\necho \"ldd (GNU libc) 2.17\"\\n' > ~/bin/ldd && "
        "chmod +x ~/bin/ldd && echo 'export PATH=$HOME/bin:$PATH' > ~/.bashrc";
    auto r = sky::test::run_command(hosts.ssh_command(0, setup));
    REQUIRE(r.status == 0);
    try {
        sky::ComputePool pool{spec};
        FAIL("the pool started on a node with glibc 2.17");
    } catch (const sky::BootstrapError& e) {
        CHECK(e.phase() == "check");
        CHECK(std::string(e.what()).find("glibc 2.17") != std::string::npos);
    }
    CHECK(sky::test::remote_workers() == 0);
}

// Every worker.log and watchdog.log on the hosts, for a failure's message.
std::string worker_logs(const TestHosts& hosts) {
    std::string all;
    for (int h = 0; h < hosts.size(); ++h) {
        std::error_code ec;
        for (auto& e : std::filesystem::recursive_directory_iterator(
                 hosts.host_path(h, "/root/.sky/run"), ec)) {
            auto name = e.path().filename().string();
            if (name != "worker.log" && name != "watchdog.log" && name != "exit") continue;
            std::ifstream f(e.path());
            all += "\n--- host " + std::to_string(h) + " " + e.path().string() + ":\n" +
                   std::string(std::istreambuf_iterator<char>(f), {});
        }
    }
    return all;
}

// Found by scripts/soak.sh: a restarted worker's start read the previous worker's port file and
// connected before anything listened, and the cost meter refused the same machine "started
// twice", so every restart on an SSH host failed.
TEST_CASE("ssh pool: a worker killed twice on its host is restarted there and serves calls again",
          "[ssh_pool]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(2);
    auto spec = spec_for(hosts, 2);
    std::mutex m;
    std::vector<std::string> replaced, errors;
    spec.on_event = [&](const sky::Event& e) -> std::optional<sky::Event> {
        std::lock_guard lk(m);
        if (auto* r = std::get_if<sky::InstanceReplaced>(&e))
            replaced.push_back(r->new_instance_id);
        if (auto* r = std::get_if<sky::ErrorEvent>(&e)) errors.push_back(r->message);
        return std::nullopt;
    };
    sky::ComputePool pool{spec};
    for (int round = 0; round < 2; ++round) {
        // A broadcast reaches every worker, which dies: the broadcast fails, typed.
        CHECK_THROWS_AS(sky::compute<die>() | pool, sky::NodeLostError);
        // Then node 1 is back and answers as itself.
        bool back = sky::test::wait_until(
            [&] {
                std::lock_guard lk(m);
                return static_cast<int>(replaced.size()) >= 2 * (round + 1);
            },
            std::chrono::seconds(60));
        std::lock_guard lk(m);
        INFO("errors: " << errors.size() << (errors.empty() ? "" : ", last: " + errors.back()));
        INFO("worker logs: " << worker_logs(hosts));
        REQUIRE(back);
    }
    CHECK((sky::compute<node_index>() | pool) == std::vector<int>{0, 1});
    CHECK(pool.instance_count() == 2);
    CHECK(pool.cost() == 0.0);
}

// Found by scripts/soak.sh: a broadcast made while a node was being replaced waited for that
// node forever when the replacement failed.
TEST_CASE("ssh pool: a broadcast waiting for a node whose replacement fails ends typed",
          "[ssh_pool]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(2);
    // Declared before the pool: should the broadcast hang, the pool's teardown ends it before
    // this future's destructor waits for it.
    std::future<std::vector<int>> b;
    sky::ComputePool pool{spec_for(hosts, 2)};
    CHECK((sky::compute<node_index>() | pool) == std::vector<int>{0, 1});
    // The program on each host becomes one that never listens: a restarted worker is given up
    // after the start's bound (15 s), so the replacement of a lost node fails.
    int swapped = 0;
    for (int h = 0; h < 2; ++h) {
        auto prog = hosts.host_path(h, "/root/.sky/prog");
        for (auto& e : std::filesystem::recursive_directory_iterator(prog)) {
            if (!e.is_regular_file() || e.path().filename() != "sky_test_ssh_pool") continue;
            std::filesystem::remove(e.path());  // a hard link into the node's store: unlink
            std::ofstream(e.path()) << "#!/bin/sh\nexec sleep 60\n";
            std::filesystem::permissions(e.path(), std::filesystem::perms::owner_all);
            ++swapped;
        }
    }
    REQUIRE(swapped == 2);
    // Every worker dies; both nodes are being replaced when the next broadcast is made.
    CHECK_THROWS_AS(sky::compute<die>() | pool, sky::NodeLostError);
    b = std::async(std::launch::async, [&] { return sky::compute<node_index>() | pool; });
    REQUIRE(b.wait_for(std::chrono::seconds(90)) == std::future_status::ready);
    CHECK_THROWS_AS(b.get(), sky::NodeLostError);
    // No node is left: a call fails at once, typed.
    CHECK_THROWS_AS(sky::compute<add>(2, 3) >> pool, sky::NodeLostError);
}

// Found by scripts/soak.sh: a replacement ran on the supervisor's thread, and while it tried to
// reach a host that was cut off (tens of seconds) no deadline was watched: a call with
// .timeout() returned its result long after the timeout.
TEST_CASE("ssh pool: a call's timeout holds while another node is being replaced", "[ssh_pool]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(2);
    auto spec = spec_for(hosts, 2);
    spec.idle_timeout = std::chrono::seconds(4);  // a node silent for 4 x 1 s + 5 s is lost
    std::mutex m;
    bool replacing = false;
    spec.on_event = [&](const sky::Event& e) -> std::optional<sky::Event> {
        if (auto* r = std::get_if<sky::ErrorEvent>(&e);
            r && r->message.find("starting a replacement") != std::string::npos) {
            std::lock_guard lk(m);
            replacing = true;
        }
        return std::nullopt;
    };
    sky::ComputePool pool{spec};
    CHECK((sky::compute<node_index>() | pool) == std::vector<int>{0, 1});
    hosts.set_link_up(1, false);  // node 1 goes silent; its replacement cannot reach the host
    REQUIRE(sky::test::wait_until(
        [&] {
            std::lock_guard lk(m);
            return replacing;
        },
        std::chrono::seconds(30)));
    // Node 0 takes a 20 s call that may take 1 s: it must fail at its timeout, not at the end.
    auto call = pool.submit(sky::compute<sleep_ms>(20000).timeout(std::chrono::seconds(1)));
    REQUIRE(call.wait_for(std::chrono::seconds(10)));
    CHECK_THROWS_AS(call.get(), sky::TimeoutError);
    hosts.set_link_up(1, true);
}
