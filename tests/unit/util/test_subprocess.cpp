// util/subprocess: a helper program's status, its two output streams, stdin, the environment it
// gets, the output cap, and the timeout that ends the program and whatever it started.
#include <signal.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <vector>

#include "sky/errors.hpp"
#include "util/subprocess.hpp"

using namespace sky::detail;
using namespace std::chrono_literals;

TEST_CASE("subprocess: status, stdout and stderr apart", "[util][subprocess]") {
    auto r = run_subprocess({"sh", "-c", "echo out; echo err >&2; exit 3"}, {}, 10s);
    CHECK(r.status == 3);
    CHECK(r.output == "out\n");
    CHECK(r.errors == "err\n");
    CHECK_FALSE(r.timed_out);
    CHECK_FALSE(r.truncated);
}

TEST_CASE("subprocess: stdin data and environment overrides", "[util][subprocess]") {
    ::setenv("SKY_SUBPROCESS_TEST_A", "from parent", 1);
    auto r = run_subprocess(
        {"sh", "-c", "cat; printf '%s|%s' \"$SKY_SUBPROCESS_TEST_A\" \"$SKY_SUBPROCESS_TEST_B\""},
        {"SKY_SUBPROCESS_TEST_B=added"}, 10s, 1 << 20, "line one\nline two\n");
    CHECK(r.status == 0);
    CHECK(r.output == "line one\nline two\nfrom parent|added");
    r = run_subprocess({"sh", "-c", "printf %s \"$SKY_SUBPROCESS_TEST_A\""},
                       {"SKY_SUBPROCESS_TEST_A=replaced"}, 10s);
    CHECK(r.output == "replaced");
    ::unsetenv("SKY_SUBPROCESS_TEST_A");
    // A large input is written while the program reads (no deadlock on a full pipe).
    const std::string big(1 << 20, 'x');
    r = run_subprocess({"wc", "-c"}, {}, 20s, 1 << 20, big);
    CHECK(r.status == 0);
    CHECK(r.output.find(std::to_string(big.size())) != std::string::npos);
}

TEST_CASE("subprocess: a program that ends before reading its stdin is no SIGPIPE here",
          "[util][subprocess]") {
    // More than a pipe holds: the writes after its end fail with EPIPE, and this process lives.
    const std::string big(4 << 20, 'x');
    auto r = run_subprocess({"sh", "-c", "exit 7"}, {}, 10s, 1 << 20, big);
    CHECK(r.status == 7);
    CHECK_FALSE(r.timed_out);
}

TEST_CASE("subprocess: output beyond the cap is dropped and said so", "[util][subprocess]") {
    auto r = run_subprocess({"sh", "-c", "head -c 100000 /dev/zero"}, {}, 10s, 1000);
    CHECK(r.status == 0);
    CHECK(r.output.size() == 1000);
    CHECK(r.truncated);
}

TEST_CASE("subprocess: a timeout kills the program and its group", "[util][subprocess]") {
    const auto t0 = std::chrono::steady_clock::now();
    // The child's own child holds the pipe too: it must be killed with the group.
    auto r = run_subprocess({"sh", "-c", "sleep 30 & echo started; wait"}, {}, 500ms);
    const auto took = std::chrono::steady_clock::now() - t0;
    CHECK(r.timed_out);
    CHECK(r.status == 128 + SIGKILL);
    CHECK(r.output == "started\n");
    CHECK(took < 10s);
}

TEST_CASE("subprocess: a program that leaves a daemon behind returns at its own exit",
          "[util][subprocess]") {
    const auto t0 = std::chrono::steady_clock::now();
    // The background sleep keeps stdout open; the program itself is done at once.
    auto r = run_subprocess({"sh", "-c", "echo hi; (sleep 5; echo late) & exit 0"}, {}, 20s);
    CHECK(r.status == 0);
    CHECK(r.output == "hi\n");
    CHECK(std::chrono::steady_clock::now() - t0 < 4s);
}

TEST_CASE("subprocess: a missing program is status -1 with the reason", "[util][subprocess]") {
    auto r = run_subprocess({"/nonexistent/sky-no-such-program"}, {}, 5s);
    CHECK(r.status != 0);
    CHECK_THROWS_AS(run_subprocess({}, {}, 1s), sky::Error);
}

TEST_CASE("subprocess: lines as they come, stderr merged, a whole environment",
          "[util][subprocess]") {
    ::setenv("SKY_SUBPROCESS_TEST_C", "secret", 1);
    std::vector<std::string> seen;
    SubprocessOptions o;
    o.env = {"PATH=/usr/bin:/bin", "ONLY=this"};
    o.inherit_env = false;
    o.merge_stderr = true;
    o.timeout = 10s;
    o.on_line = [&](std::string_view l) { seen.emplace_back(l); };
    auto r = run_subprocess({"sh", "-c",
                             "echo one; echo two >&2; printf '%s|%s' \"$ONLY\" "
                             "\"${SKY_SUBPROCESS_TEST_C:-unset}\""},
                            o);
    ::unsetenv("SKY_SUBPROCESS_TEST_C");
    CHECK(r.status == 0);
    CHECK(r.errors.empty());
    CHECK(r.output == "one\ntwo\nthis|unset");
    CHECK(seen == std::vector<std::string>{"one", "two", "this|unset"});

    // A line without end is handed on in bounded pieces.
    seen.clear();
    o.inherit_env = true;
    o.env.clear();
    o.output_cap = 0;
    r = run_subprocess({"sh", "-c", "head -c 200000 /dev/zero | tr '\\0' x"}, o);
    CHECK(r.status == 0);
    CHECK(r.output.empty());
    CHECK(r.truncated);
    REQUIRE(seen.size() == 4);
    CHECK(seen[0].size() == 65536);
    CHECK(seen[3].size() == 200000 - 3 * 65536);
}

TEST_CASE("subprocess: a cancel flag ends the program and its group", "[util][subprocess]") {
    std::atomic<bool> cancel{false};
    SubprocessOptions o;
    o.timeout = 60s;
    o.cancel = &cancel;
    o.on_line = [&](std::string_view l) {
        if (l == "started") cancel = true;
    };
    const auto t0 = std::chrono::steady_clock::now();
    auto r = run_subprocess({"sh", "-c", "sleep 30 & echo started; wait"}, o);
    CHECK(r.cancelled);
    CHECK_FALSE(r.timed_out);
    CHECK(r.status == 128 + SIGKILL);
    CHECK(std::chrono::steady_clock::now() - t0 < 10s);
}
