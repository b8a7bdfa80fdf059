// A worker on an SSH node that dies of a sanitizer finding: the NodeLostError says what the
// sanitizer said (docs/sanitizers.md). No sanitized build is needed: the function does what a
// sanitizer runtime does on a finding with the options the node's start script gives it (the
// report to `<log_path>.<pid>`, then exit status 1), so what is checked is the node's side: that
// the options reach the worker and that the pool reads the report back.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <string>

#include "hosts/test_hosts.hpp"
#include "sky/sky.hpp"

using sky::test::TestHosts;

namespace ssh_pool_sanitizer {

// The log_path the node's start script put first in ASAN_OPTIONS, or "" when there is none.
std::string asan_log_path() {
    const char* o = std::getenv("ASAN_OPTIONS");
    if (!o) return "";
    std::string opts = o;
    const std::string key = "log_path=";
    if (opts.rfind(key, 0) != 0) return "";
    return opts.substr(key.size(), opts.find(':') == std::string::npos
                                       ? std::string::npos
                                       : opts.find(':') - key.size());
}

int die_like_asan(int) {
    const std::string path = asan_log_path();
    // Without the option the worker says so and exits with another status, which the test
    // reports: the report would otherwise have nowhere to go.
    if (path.empty()) ::_exit(7);
    const int pid = static_cast<int>(::getpid());
    {
        std::ofstream f(path + "." + std::to_string(pid));
        f << "=================================================================\n"
          << "==" << pid
          << "==ERROR: AddressSanitizer: heap-use-after-free on address 0x602000000010 at pc "
             "0x5581 bp 0x7ffd sp 0x7ffd\n"
          << "READ of size 4 at 0x602000000010 thread T3\n"
          << "    #0 0x5581 in ssh_pool_sanitizer::die_like_asan(int) "
             "test_sanitizer_report.cpp:40\n";
    }
    ::_exit(1);
}

}  // namespace ssh_pool_sanitizer

TEST_CASE("ssh pool: a worker's sanitizer report is in the NodeLostError", "[ssh_pool]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(1);
    sky::SSH ssh;
    ssh.hosts.push_back(hosts.address(0));
    ssh.user = hosts.user();
    ssh.port = hosts.port(0);
    ssh.identity_file = hosts.client_key_path().string();
    ssh.known_hosts = hosts.known_hosts_file().string();
    sky::ComputePool pool{{.provider = ssh, .nodes = 1, .display = sky::Display::quiet}};
    std::string what;
    try {
        sky::compute<ssh_pool_sanitizer::die_like_asan>(1) >> pool;
    } catch (const sky::NodeLostError& e) {
        what = e.what();
        CHECK(e.reason() == sky::NodeLostError::Reason::worker_crashed);
    }
    INFO(what);
    CHECK(what.find("exited with status 1") != std::string::npos);
    CHECK(what.find("its sanitizer report begins:") != std::string::npos);
    CHECK(what.find("ERROR: AddressSanitizer: heap-use-after-free on address 0x602000000010") !=
          std::string::npos);
    CHECK(what.find("READ of size 4 at 0x602000000010 thread T3") != std::string::npos);
    // The line before the report (the separator) is not part of it.
    CHECK(what.find("=====\n") == std::string::npos);
}
