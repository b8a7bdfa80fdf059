// An interrupted test run leaves nothing: a program holding test hosts is killed (SIGKILL,
// SIGTERM, or SIGKILL to its whole process group, as ctest's time limit and CI runners do), and
// its hosts' reaper removes the namespaces, the bridge and the directory, and ends every process
// in the hosts (sshd, and one the program started there in a session of its own).
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "hosts/test_hosts.hpp"

extern char** environ;

namespace {

struct Held {
    pid_t pid = -1;
    std::vector<std::string> netns;
    std::string bridge, dir;
    pid_t stray = -1;
};

// Starts the holder in a process group of its own (as ctest starts a test) with its reaper's log
// at `log`, and reads what it made. FAILs when it is not ready within a minute.
Held start_holder(const std::string& log) {
    int out[2];
    REQUIRE(::pipe(out) == 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) env.emplace_back(*e);
    env.push_back("SKY_TEST_REAPER_LOG=" + log);
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    char* argv[] = {const_cast<char*>(SKY_TEST_HOLDER), nullptr};
    Held h;
    const int rc = ::posix_spawn(&h.pid, SKY_TEST_HOLDER, &fa, &attr, argv, envp.data());
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    ::close(out[1]);
    REQUIRE(rc == 0);
    std::string text;
    const auto until = std::chrono::steady_clock::now() + std::chrono::minutes(1);
    char buf[4096];
    while (text.find("ready\n") == std::string::npos && std::chrono::steady_clock::now() < until) {
        const ssize_t n = ::read(out[0], buf, sizeof buf);  // the holder prints, then sleeps
        if (n <= 0) break;
        text.append(buf, static_cast<std::size_t>(n));
    }
    ::close(out[0]);
    INFO(text);
    REQUIRE(text.find("ready\n") != std::string::npos);
    std::istringstream lines(text);
    for (std::string what, value; lines >> what;) {
        if (what == "ready") break;
        lines >> value;
        if (what == "netns") h.netns.push_back(value);
        if (what == "bridge") h.bridge = value;
        if (what == "dir") h.dir = value;
        if (what == "stray") h.stray = std::stoi(value);
    }
    return h;
}

bool alive(pid_t pid) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string s((std::istreambuf_iterator<char>(stat)), {});
    const auto close = s.rfind(')');
    return close != std::string::npos && s.size() > close + 2 && s[close + 2] != 'Z';
}

bool link_exists(const std::string& name) {
    return sky::test::run_command({"ip", "link", "show", name}).status == 0;
}

bool nothing_left(const Held& h) {
    for (const auto& ns : h.netns)
        if (std::filesystem::exists("/run/netns/" + ns)) return false;
    return !link_exists(h.bridge) && !std::filesystem::exists(h.dir) && !alive(h.stray);
}

}  // namespace

TEST_CASE(
    "test hosts: a program killed while holding test hosts leaves no namespace, bridge, process "
    "or directory",
    "[hosts]") {
    SKIP_WITHOUT_HOSTS();
    char tmpl[] = "/tmp/sky-test-reaper-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    const std::string scratch = tmpl;
    struct Cleanup {
        std::string dir;
        ~Cleanup() {
            std::error_code ec;
            std::filesystem::remove_all(dir, ec);
        }
    } cleanup{scratch};
    struct Kill {
        const char* name;
        bool group;
        int sig;
    };
    for (const Kill k : {Kill{"SIGKILL", false, SIGKILL}, Kill{"SIGTERM", false, SIGTERM},
                         Kill{"SIGKILL to the process group", true, SIGKILL}}) {
        INFO(k.name);
        const std::string log = scratch + "/reaper-" + std::to_string(k.sig) + (k.group ? "g" : "");
        Held h = start_holder(log);
        REQUIRE(h.netns.size() == 2);
        REQUIRE(std::filesystem::exists("/run/netns/" + h.netns[0]));
        REQUIRE(link_exists(h.bridge));
        REQUIRE(std::filesystem::exists(h.dir));
        REQUIRE(alive(h.stray));
        REQUIRE(::kill(k.group ? -h.pid : h.pid, k.sig) == 0);
        int status = 0;
        for (int i = 0; i < 500 && ::waitpid(h.pid, &status, WNOHANG) == 0; ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        CHECK(WIFSIGNALED(status));
        CHECK(sky::test::wait_until([&] { return nothing_left(h); }, std::chrono::seconds(30)));
        // The reaper did it (not only another test run's sweep of what dead runs left, which
        // may finish first while tests run side by side: the reaper says so when it is done).
        std::string said;
        CHECK(sky::test::wait_until(
            [&] {
                std::ifstream in(log);
                said.assign(std::istreambuf_iterator<char>(in), {});
                return !said.empty();
            },
            std::chrono::seconds(30)));
        CHECK(said == "reaped " + h.bridge + "\n");
        if (alive(h.stray)) ::kill(h.stray, SIGKILL);
    }
}
