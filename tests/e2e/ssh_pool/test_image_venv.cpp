// On a remote node the image's pip environment is active for the worker: a function's python3
// and pip are the venv's the bootstrap made (no package, so nothing comes from the network).
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "hosts/ssh_provider.hpp"
#include "hosts/test_hosts.hpp"
#include "sky/sky.hpp"

using sky::test::TestHosts;

namespace ssh_venv {

std::string getenv_of(std::string k) {
    const char* v = std::getenv(k.c_str());
    return v ? v : "<unset>";
}

// What `cmd` printed, run with the worker's environment.
std::string run_shell(std::string cmd) {
    std::string out;
    if (FILE* p = ::popen(cmd.c_str(), "r")) {
        char buf[512];
        for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
        ::pclose(p);
    }
    return out;
}

}  // namespace ssh_venv

using namespace ssh_venv;

TEST_CASE(
    "ssh pool: the image's pip environment is active for the worker (VIRTUAL_ENV, its bin "
    "first on PATH)",
    "[ssh_pool]") {
    SKIP_WITHOUT_HOSTS();
    if (std::system("python3 -c 'import venv, ensurepip' > /dev/null 2>&1") != 0) {
        WARN("skipped: python3 with the venv module (python3-venv) is not installed");
        return;
    }
    TestHosts hosts(2);
    sky::SSH ssh = sky::test::ssh_provider(hosts);
    {
        sky::ComputePool pool{{.provider = ssh,
                               .nodes = 2,
                               .image = sky::Image{.python = "3"},
                               .display = sky::Display::quiet}};
        const auto venvs = sky::compute<getenv_of>(std::string("VIRTUAL_ENV")) | pool;
        const auto paths = sky::compute<getenv_of>(std::string("PATH")) | pool;
        const auto pythons = sky::compute<run_shell>(std::string("command -v python3")) | pool;
        const auto pips = sky::compute<run_shell>(std::string("command -v pip")) | pool;
        const auto prefixes =
            sky::compute<run_shell>(std::string("python3 -c 'import sys; print(sys.prefix)'")) |
            pool;
        REQUIRE(venvs.size() == 2);
        for (std::size_t i = 0; i < venvs.size(); ++i) {
            INFO("node " << i);
            const std::string& venv = venvs[i];
            CHECK(venv.rfind("/root/.sky/image-", 0) == 0);
            CHECK(venv.size() > 5);
            CHECK(venv.substr(venv.size() - 5) == "/venv");
            CHECK(paths[i].rfind(venv + "/bin:", 0) == 0);
            CHECK(pythons[i] == venv + "/bin/python3\n");
            CHECK(pips[i] == venv + "/bin/pip\n");
            CHECK(prefixes[i] == venv + "\n");
        }
    }
    CHECK(sky::test::remote_workers() == 0);
}
