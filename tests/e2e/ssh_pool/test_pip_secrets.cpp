// An image's pip index credentials against a local user of the nodes (security review r4 M2):
// while the nodes install a package from a private index whose URL carries a token, an
// unprivileged process on each test host reads every process's command line and must never
// find the token; the package must still come from that index, with the token.
#include <openssl/rand.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "hosts/ssh_provider.hpp"
#include "hosts/test_hosts.hpp"
#include "sky/sky.hpp"

using sky::test::TestHosts;
namespace fs = std::filesystem;

namespace ssh_pip {
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
}  // namespace ssh_pip

TEST_CASE(
    "ssh security: a pip index token reaches pip, and no process's command line, on the nodes",
    "[ssh_pool][security]") {
    SKIP_WITHOUT_HOSTS();
    if (std::system("python3 -c 'import venv, ensurepip' > /dev/null 2>&1") != 0) {
        WARN("skipped: python3 with the venv module (python3-venv) is not installed");
        return;
    }
    TestHosts hosts(2);
    unsigned char b[16];
    REQUIRE(RAND_bytes(b, sizeof b) == 1);
    std::string token = "skypiptoken";
    for (auto c : b) token += "0123456789abcdef"[c & 15];
    const std::string bridge = hosts.address(0).substr(0, hosts.address(0).rfind('.')) + ".1";
    const fs::path token_file = hosts.dir() / "pip-token";
    std::ofstream(token_file) << token << "\n";
    const fs::path port_file = hosts.dir() / "pip-index-port";
    auto index = std::async(std::launch::async, [&] {
        return sky::test::run_command({"python3", SKY_PIP_INDEX_SCRIPT, bridge, port_file.string(),
                                       token_file.string(), "90"},
                                      std::chrono::seconds(120));
    });
    REQUIRE(sky::test::wait_until([&] { return fs::exists(port_file); }, std::chrono::seconds(20)));
    std::string port;
    std::ifstream(port_file) >> port;
    const std::string base = "http://" + bridge + ":" + port;
    for (int i = 0; i < hosts.size(); ++i) {
        // The nodes' own pip settings: the test's index without credentials instead of PyPI
        // (nothing from the internet), plain http allowed for it.
        fs::create_directories(hosts.host_path(i, "/root/.config/pip"));
        std::ofstream(hosts.host_path(i, "/root/.config/pip/pip.conf"))
            << "[global]\nindex-url = " << base << "/public/simple\ntrusted-host = " << bridge
            << "\ntimeout = 10\nretries = 0\ndisable-pip-version-check = true\n";
        fs::copy_file(SKY_ATTACKER_SCRIPT, hosts.host_path(i, "/tmp/attacker.py"),
                      fs::copy_options::overwrite_existing);
        std::ofstream(hosts.host_path(i, "/tmp/attacker-secret")) << token << "\n";
        fs::permissions(hosts.host_path(i, "/tmp/attacker-secret"),
                        fs::perms::owner_read | fs::perms::others_read);
    }
    std::vector<std::future<sky::test::CommandResult>> attackers;
    for (int i = 0; i < hosts.size(); ++i)
        attackers.push_back(std::async(std::launch::async, [&hosts, i] {
            return sky::test::run_command(
                hosts.ssh_command(i,
                                  "setpriv --reuid=65534 --regid=65534 --clear-groups "
                                  "/usr/bin/python3 /tmp/attacker.py 45 /tmp/attacker-secret"),
                std::chrono::seconds(70));
        }));
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // the attackers are watching
    try {
        sky::ComputePool pool{
            {.provider = sky::test::ssh_provider(hosts),
             .nodes = 2,
             .image = sky::Image{.pip = {"skytokpkg==1.0"},
                                 .pip_extra_index_url =
                                     "http://sky:" + token + "@" + bridge + ":" + port + "/simple"},
             .display = sky::Display::quiet}};
        // The package came from the private index into the image's venv.
        for (const auto& v : sky::compute<ssh_pip::shell_output>(std::string(
                                 "python3 -c 'import skytokpkg; print(skytokpkg.VALUE)'")) |
                                 pool)
            CHECK(v == "4242\n");
        // pip's private files are gone once it is done.
        for (const auto& v : sky::compute<ssh_pip::shell_output>(std::string(
                                 "ls -d \"$VIRTUAL_ENV\"/../pip.* 2>/dev/null | wc -l")) |
                                 pool)
            CHECK(v == "0\n");
    } catch (const sky::BootstrapError& e) {
        for (const auto& l : e.output()) UNSCOPED_INFO(l);
        FAIL(e.what());
    }
    for (auto& a : attackers) {
        auto r = a.get();
        INFO(r.output);
        REQUIRE(r.output.find("attacker uid=65534") != std::string::npos);
        REQUIRE(r.output.find("attacker done") != std::string::npos);
        CHECK(r.output.find("secret-in-ps") == std::string::npos);
    }
    auto served = index.get();
    INFO(served.output);
    CHECK(served.output.find("served /simple/skytokpkg/ auth=yes") != std::string::npos);
    CHECK(served.output.find("served /files/skytokpkg-1.0-py3-none-any.whl auth=yes") !=
          std::string::npos);
}
