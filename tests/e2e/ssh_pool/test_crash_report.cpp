// A worker on an SSH node killed by a segfault in a call: the node's crash report comes back
// over the node's SSH session, and the client symbolizes it from its own copy of the program
// (the node runs the shipped copy, at other addresses).
#include <catch2/catch.hpp>
#include <iostream>
#include <string>

#include "hosts/ssh_provider.hpp"
#include "hosts/test_hosts.hpp"
#include "sky/sky.hpp"
#include "support/crash_expect.hpp"

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
    sky::ComputePool pool{
        {.provider = sky::test::ssh_provider(hosts), .nodes = 1, .display = sky::Display::quiet}};
    try {
        sky::compute<ssh_pool_crash::write_through_null>(3) >> pool;
        FAIL("no exception");
    } catch (const sky::NodeLostError& e) {
        sky::test::expect_null_write(e, "ssh_pool_crash::write_through_null",
                                     "test_crash_report.cpp", ssh_pool_crash::null_write_line,
                                     "crashing on the node");
    }
    // The worker is restarted on the node as before.
    CHECK(sky::compute<ssh_pool_crash::plus_one>(1) >> pool == 2);
}
