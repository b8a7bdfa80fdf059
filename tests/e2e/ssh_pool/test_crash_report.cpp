// A worker on an SSH node killed by a segfault in a call: the node's crash report comes back
// over the node's SSH session, and the client symbolizes it from its own copy of the program
// (the node runs the shipped copy, at other addresses).
#include <signal.h>

#include <catch2/catch.hpp>
#include <iostream>
#include <string>

#include "hosts/test_hosts.hpp"
#include "sky/sky.hpp"

using sky::test::TestHosts;

namespace ssh_pool_crash {

int* volatile null_target = nullptr;

// Not inlined into sky's call wrapper: the frame the test looks for is the function's own.
__attribute__((noinline)) int write_through_null(int x) {
    std::cout << "crashing on the node" << std::endl;
    *null_target = x;  // SIGSEGV here
    return x;
}
const int null_write_line = __LINE__ - 3;

int plus_one(int x) { return x + 1; }

}  // namespace ssh_pool_crash

TEST_CASE(
    "ssh pool: a segfault's signal, function, line and last output are in the "
    "NodeLostError",
    "[ssh_pool]") {
    SKIP_WITHOUT_HOSTS();
    TestHosts hosts(1);
    sky::SSH ssh;
    ssh.hosts.push_back(hosts.address(0));
    ssh.user = hosts.user();
    ssh.port = hosts.port(0);
    ssh.identity_file = hosts.client_key_path().string();
    ssh.known_hosts = hosts.known_hosts_file().string();
    sky::ComputePool pool{{.provider = ssh, .nodes = 1, .display = sky::Display::quiet}};
    try {
        sky::compute<ssh_pool_crash::write_through_null>(3) >> pool;
        FAIL("no exception");
    } catch (const sky::NodeLostError& e) {
        INFO(e.what());
        CHECK(e.reason() == sky::NodeLostError::Reason::worker_crashed);
        CHECK(e.signal() == SIGSEGV);
        CHECK(e.started());
        REQUIRE_FALSE(e.stack().empty());
        const sky::StackFrame& top = e.stack().front();
        CHECK(top.function.find("ssh_pool_crash::write_through_null") != std::string::npos);
        CHECK(top.file.find("test_crash_report.cpp") != std::string::npos);
        CHECK(top.line == ssh_pool_crash::null_write_line);
        CHECK(e.remote_log() == std::vector<std::string>{"crashing on the node"});
    }
    // The worker is restarted on the node as before.
    CHECK(sky::compute<ssh_pool_crash::plus_one>(1) >> pool == 2);
}
