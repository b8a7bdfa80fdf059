// sky::init's modes (security review r4 I5): the worker and file-server flags count only as the
// first argument, where sky puts them; the same word further on is the program's own argument
// (perhaps forwarded from someone else) and must not turn the program into a file server.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>

#include "hosts/test_hosts.hpp"

TEST_CASE("sky::init: --sky-serve-files after the first argument is the program's own",
          "[local][security]") {
    char buf[4096];
    const auto n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
    REQUIRE(n > 0);
    const std::string exe(buf, static_cast<std::size_t>(n));
    // This test program with a Catch option first: its main runs (Catch lists the tests).
    auto r = sky::test::run_command({exe, "--list-test-names-only", "--sky-serve-files"},
                                    std::chrono::seconds(30));
    INFO(r.output);
    CHECK(r.output.find("sky file server") == std::string::npos);
    // As the first argument it is the mode (it says what it lacks, as on a node without them).
    r = sky::test::run_command({exe, "--sky-serve-files"}, std::chrono::seconds(30));
    CHECK(r.output.find("sky file server") != std::string::npos);
    CHECK(r.status == 2);
}
