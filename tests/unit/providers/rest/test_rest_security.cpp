// The REST clouds against a hostile or broken API, and container nodes' copies of their launch
// host key (security review r4 L7, L8): numbers from an API reach no undefined conversion and no
// truncated port; a container's start command leaves the boot script in no file and no
// process's environment; the container boot script's own copy is private and removed.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "providers/rest/container_boot.hpp"
#include "providers/rest/json_api.hpp"
#include "support/proc_file.hpp"
#include "util/shell.hpp"

using nlohmann::json;
using sky::detail::rest::int_of;
using sky::detail::rest::port_of;
namespace fs = std::filesystem;

extern char** environ;

TEST_CASE("rest: a cloud's numbers become ints only within their range", "[rest][security]") {
    const json j = json::parse(R"({"ok": 8, "str": "16", "frac": 2.5, "neg": -1, "huge": 1e300,
        "big": 4294967297, "port": 65558, "p22": 22, "nan": "nan", "text": "x", "null": null})");
    CHECK(int_of(j, "ok", 0, 100) == 8);
    CHECK(int_of(j, "str", 0, 100) == 16);
    CHECK_FALSE(int_of(j, "frac", 0, 100));
    CHECK_FALSE(int_of(j, "neg", 0, 100));
    CHECK_FALSE(int_of(j, "huge", 0, 1 << 20));  // a double far beyond int: never cast
    CHECK_FALSE(int_of(j, "big", 0, 1 << 30));
    CHECK_FALSE(int_of(j, "nan", 0, 100));
    CHECK_FALSE(int_of(j, "text", 0, 100));
    CHECK_FALSE(int_of(j, "null", 0, 100));
    CHECK_FALSE(int_of(j, "absent", 0, 100));
    // 65558 would have become port 22 in 16 bits.
    CHECK_FALSE(port_of(j, "port"));
    CHECK(port_of(j, "p22") == 22);
    CHECK_FALSE(port_of(json::parse(R"({"p": 0})"), "p"));
}

TEST_CASE("container start: the boot script is in no file and in no process's environment",
          "[rest][security]") {
    // Review r4 L7: RunPod's start command wrote the script (with the node's host key) to
    // /tmp/sky-start.sh and kept it in the pod's SKY_START for the container's life.
    char tmpl[] = "/tmp/sky-start-test-XXXXXX";
    REQUIRE(::mkdtemp(tmpl));
    const fs::path dir = tmpl;
    struct Cleanup {
        fs::path d;
        ~Cleanup() {
            std::error_code ec;
            fs::remove_all(d, ec);
        }
    } cleanup{dir};
    const bool stale_copy = fs::exists("/tmp/sky-start.sh");
    const std::string out = (dir / "out").string();
    const std::string script = "echo ran > " + sky::detail::shell_quote(out) +
                               "; echo \"start=${SKY_START:-unset}\" >> " +
                               sky::detail::shell_quote(out) + "\n";
    const std::string cmd = sky::detail::container_start_command("SKY_START");
    const std::string mark =
        "SKY_TEST_MARK=" + std::to_string(::getpid()) + "-" + dir.filename().string();
    std::vector<std::string> env = {"SKY_START=" + script, "PATH=/usr/bin:/bin", mark};
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::string sh = "sh", c = "-c", body = cmd;
    char* argv[] = {sh.data(), c.data(), body.data(), nullptr};
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);  // one group: killed as one below
    posix_spawnattr_setpgroup(&attr, 0);
    pid_t pid = 0;
    const int rc = ::posix_spawn(&pid, "/bin/sh", nullptr, &attr, argv, envp.data());
    posix_spawnattr_destroy(&attr);
    REQUIRE(rc == 0);
    struct Kill {
        pid_t group;
        ~Kill() {
            ::kill(-group, SIGKILL);
            ::waitpid(group, nullptr, 0);
        }
    } kill_group{pid};
    // The script runs; then what stays (the container's main process) is `sleep`: found by
    // the mark in its environment, which must not hold the script.
    std::string environ_text;
    bool slept = false;
    for (int i = 0; i < 100 && !slept; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        for (const auto& e : fs::directory_iterator("/proc")) {
            std::ifstream comm(e.path() / "comm");
            std::string name;
            comm >> name;
            if (name != "sleep") continue;
            std::string text = sky::test::read_proc_file(e.path() / "environ");
            if (text.find(mark) == std::string::npos) continue;
            environ_text = text;
            slept = true;
        }
    }
    REQUIRE(slept);
    std::ifstream in(out);
    const std::string seen(std::istreambuf_iterator<char>(in), {});
    CHECK(seen == "ran\nstart=unset\n");                            // it ran, without the variable
    CHECK(environ_text.find("SKY_START") == std::string::npos);     // the process that stays
    if (!stale_copy) CHECK_FALSE(fs::exists("/tmp/sky-start.sh"));  // no copy on disk
}

TEST_CASE("container boot: its copy of the boot script is private and gone after it ran",
          "[rest][security]") {
    if (::geteuid() != 0 || std::system("command -v unshare > /dev/null 2>&1") != 0 ||
        ::access("/usr/sbin/sshd", X_OK) != 0) {
        WARN("skipped: needs root, unshare and /usr/sbin/sshd (a private /tmp and /root)");
        return;
    }
    // The container: a private /tmp and /root (mount namespace), this machine's everything
    // else. Its work directory is outside /tmp, which the private /tmp would hide.
    const fs::path dir = "/run/sky-boot-test-" + std::to_string(::getpid());
    fs::create_directories(dir / "bin");
    struct Cleanup {
        fs::path d;
        ~Cleanup() {
            std::error_code ec;
            fs::remove_all(d, ec);
        }
    } cleanup{dir};
    // pgrep says an sshd runs and pkill does nothing: the script touches no sshd of this
    // machine's.
    std::ofstream(dir / "bin/pgrep") << "#!/bin/sh\nexit 0\n";
    std::ofstream(dir / "bin/pkill") << "#!/bin/sh\nexit 0\n";
    fs::permissions(dir / "bin/pgrep", fs::perms::owner_all);
    fs::permissions(dir / "bin/pkill", fs::perms::owner_all);
    const std::string report = (dir / "report").string();
    // The pool's boot script reports the mode of the copy it runs from.
    const std::string boot = "#!/bin/bash\nstat -c %a \"$0\" > " + report + "\n";
    std::ofstream(dir / "container.sh")
        << sky::detail::container_boot_script(boot, "ssh-ed25519 AAAAC3Nza test@sky");
    const std::string run =
        "unshare -m --propagation private sh -c 'mount -t tmpfs none /tmp && "
        "mount -t tmpfs none /root && umask 022 && PATH=" +
        (dir / "bin").string() + ":$PATH bash " + (dir / "container.sh").string() +
        " && test ! -e /tmp/sky-boot.sh && echo gone >> " + report + "' > /dev/null 2>&1";
    CHECK(std::system(run.c_str()) == 0);
    std::ifstream in(report);
    const std::string seen(std::istreambuf_iterator<char>(in), {});
    CHECK(seen == "600\ngone\n");  // only its owner could read it, and it is gone
}
