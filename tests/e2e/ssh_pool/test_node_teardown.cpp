// A node's teardown against pid reuse (security review r4 L3): the worker died long before
// teardown and the kernel gave its process group id to another process group of the login user
// (root here, as on four clouds). stop() and restart_worker() must leave that group alone.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "hosts/ssh_provider.hpp"
#include "hosts/test_hosts.hpp"
#include "providers/remote/remote_node.hpp"
#include "sky/sky.hpp"

using sky::test::TestHosts;
namespace fs = std::filesystem;

namespace {

// A process group of this machine whose id is `pgid` (the hosts share this machine's pid
// space): /proc/sys/kernel/ns_last_pid makes the next fork get it; other processes forking at
// the same moment may take it first, so this tries a bounded number of times. -1 when it could
// not.
pid_t impostor_with_pid(pid_t pgid) {
    for (int attempt = 0; attempt < 500; ++attempt) {
        {
            std::ofstream f("/proc/sys/kernel/ns_last_pid");
            if (!f) return -1;
            f << (pgid - 1);
        }
        const pid_t p = ::fork();
        if (p == 0) {
            ::setsid();  // a process group, and session, of its own: id == pid
            ::execlp("sleep", "sleep", "120", static_cast<char*>(nullptr));
            ::_exit(127);
        }
        if (p == pgid) return p;
        if (p > 0) {
            ::kill(p, SIGKILL);
            ::waitpid(p, nullptr, 0);
        }
    }
    return -1;
}

bool alive(pid_t p) { return ::waitpid(p, nullptr, WNOHANG) == 0 && ::kill(p, 0) == 0; }

struct Reaper {
    pid_t pid = -1;
    ~Reaper() {
        if (pid > 0) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, nullptr, 0);
        }
    }
};

std::unique_ptr<sky::detail::RemoteNode> start_node(const TestHosts& hosts,
                                                    const std::string& pool) {
    sky::detail::RemoteNodeSpec where;
    where.host = hosts.address(0);
    where.port = hosts.port(0);
    where.user = hosts.user();
    where.private_key_file = hosts.client_key_path();
    where.host_key = sky::detail::ssh::HostKeyPin::public_key(hosts.host_public_key(0));
    sky::PoolSpec spec{.provider = sky::test::ssh_provider(hosts), .display = sky::Display::quiet};
    return sky::detail::RemoteNode::start(where, spec, pool, 0, "host0", [](sky::Event) {});
}

// The worker's process group and its leader's start time, as the node recorded them.
std::pair<pid_t, std::string> worker_group(const TestHosts& hosts, const std::string& pool) {
    std::ifstream f(hosts.host_path(0, "/root/.sky/run/" + pool + "/0/worker.pgid"));
    pid_t pg = -1;
    std::string start;
    f >> pg >> start;
    return {pg, start};
}

// Kills the worker's whole group (a crash) and waits until its id is free.
void crash_worker(pid_t pg) {
    ::kill(-pg, SIGKILL);
    REQUIRE(sky::test::wait_until(
        [&] { return ::kill(-pg, 0) != 0 && !fs::exists("/proc/" + std::to_string(pg)); },
        std::chrono::seconds(10)));
}

}  // namespace

TEST_CASE("ssh node: stop() leaves alone a process group that took the dead worker's id",
          "[ssh_pool][security]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(1);
    auto node = start_node(hosts, "l3stop");
    const auto [pg, start] = worker_group(hosts, "l3stop");
    REQUIRE(pg > 1);
    REQUIRE_FALSE(start.empty());
    crash_worker(pg);
    Reaper impostor{impostor_with_pid(pg)};
    if (impostor.pid < 0) {
        WARN("skipped: could not get pid " << pg << " for the other process group");
        return;
    }
    REQUIRE(alive(impostor.pid));
    node->stop();
    CHECK(alive(impostor.pid));
}

TEST_CASE("ssh node: restart_worker() leaves alone a process group that took the dead worker's id",
          "[ssh_pool][security]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(1);
    auto node = start_node(hosts, "l3restart");
    const auto [pg, start] = worker_group(hosts, "l3restart");
    REQUIRE(pg > 1);
    crash_worker(pg);
    Reaper impostor{impostor_with_pid(pg)};
    if (impostor.pid < 0) {
        WARN("skipped: could not get pid " << pg << " for the other process group");
        return;
    }
    node->restart_worker([](sky::Event) {});
    CHECK(alive(impostor.pid));
    // The fresh worker is a group of its own, and teardown ends it.
    const auto [pg2, start2] = worker_group(hosts, "l3restart");
    CHECK(pg2 != pg);
    CHECK(::kill(-pg2, 0) == 0);
    node->stop();
    CHECK(sky::test::wait_until([&] { return ::kill(-pg2, 0) != 0; }, std::chrono::seconds(10)));
    CHECK(alive(impostor.pid));
}
