// Crash forensics and at-most-once on a real Local pool (api.md §3): a call that kills its
// worker says where (signal, stack symbolized here, last output), and whether a lost call had
// started decides whether .at_most_once() retries it.
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "e2e/local/functions.hpp"
#include "sky/sky.hpp"
#include "support/crash_expect.hpp"

namespace forensics {

// Opaque to the optimizer: the store below is a real store through a null pointer.
int* volatile null_target = nullptr;
// The line of the store, for the test to find in the stack.
extern const int null_write_line;

// Not inlined into sky's call wrapper: the frame the test looks for is the function's own.
__attribute__((noinline)) int write_through_null(int x) {
    std::cout << "about to write " << x << " through a null pointer" << std::endl;
    *null_target = x;  // the crash: SIGSEGV at this line
    return x;
}
const int null_write_line = __LINE__ - 3;

// Lines in `path` (how many times a function ran, one line per run).
int lines_in(const std::string& path) {
    std::ifstream f(path);
    int n = 0;
    for (std::string l; std::getline(f, l);) ++n;
    return n;
}

// Counts its runs in `path` (a line per run, with the worker's pid). The first run waits to
// be killed; a later one returns how many runs there were.
int counted_run(std::string path) {
    const int before = lines_in(path);
    std::ofstream(path, std::ios::app) << ::getpid() << "\n" << std::flush;
    if (before == 0) std::this_thread::sleep_for(std::chrono::seconds(60));
    return before + 1;
}

// Marks its start in `dir/<i>` (the worker's pid), then sleeps `ms`.
int marked(std::string dir, int i, int ms) {
    std::ofstream(dir + "/" + std::to_string(i), std::ios::app) << ::getpid() << "\n" << std::flush;
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    return i;
}

// The pid in the first line of `path` once it exists (within 10 s); -1 otherwise.
long first_pid(const std::string& path) {
    for (int i = 0; i < 1000; ++i) {
        std::ifstream f(path);
        long pid = 0;
        if (f >> pid && pid > 0) return pid;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
}

}  // namespace forensics

using namespace forensics;

TEST_CASE("a segfaulting call reports the signal, its function and line, and its last output",
          "[local][forensics]") {
    sky::ComputePool pool{e2e::quiet(1)};
    try {
        sky::compute<write_through_null>(7) >> pool;
        FAIL("no exception");
    } catch (const sky::NodeLostError& e) {
        sky::test::expect_null_write(e, "forensics::write_through_null", "test_forensics.cpp",
                                     null_write_line, "about to write 7 through a null pointer");
        // Its callers include the worker's executor (symbolized too).
        bool executor = false;
        for (auto& f : e.stack()) executor |= f.function.find("Executor::") != std::string::npos;
        CHECK(executor);
    }
    // The worker is restarted as before.
    CHECK(sky::compute<e2e::add>(2, 3) >> pool == 5);
}

TEST_CASE("an abort reports SIGABRT and the frames down to the function", "[local][forensics]") {
    sky::ComputePool pool{e2e::quiet(1)};
    try {
        sky::compute<e2e::crash_abort>(1) >> pool;
        FAIL("no exception");
    } catch (const sky::NodeLostError& e) {
        INFO(e.what());
        CHECK(e.signal() == SIGABRT);
        bool found = false;
        for (auto& f : e.stack()) found |= f.function.find("e2e::crash_abort") != std::string::npos;
        CHECK(found);
        CHECK(std::string(e.what()).find("signal 6") != std::string::npos);
        CHECK(e.remote_log() == std::vector<std::string>{"going down"});
    }
}

TEST_CASE("a node lost during an at-most-once call: one run, started() true, no retry",
          "[local][at_most_once]") {
    e2e::TempDir dir;
    const std::string runs = dir.path + "/runs";
    sky::ComputePool pool{e2e::quiet(2)};
    auto f = pool.submit(sky::compute<counted_run>(runs).retries(1).at_most_once());
    const long pid = first_pid(runs);
    REQUIRE(pid > 0);
    REQUIRE(::kill(static_cast<pid_t>(pid), SIGKILL) == 0);
    try {
        f.get();
        FAIL("no exception");
    } catch (const sky::NodeLostError& e) {
        INFO(e.what());
        CHECK(e.started());
        CHECK(e.signal() == 0);  // SIGKILL leaves no report; the exit status says it
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    CHECK(lines_in(runs) == 1);
}

TEST_CASE("a node lost during a call with plain retries: it runs again (at least once)",
          "[local][at_most_once]") {
    e2e::TempDir dir;
    const std::string runs = dir.path + "/runs";
    sky::ComputePool pool{e2e::quiet(2)};
    auto f = pool.submit(sky::compute<counted_run>(runs).retries(1));
    const long pid = first_pid(runs);
    REQUIRE(pid > 0);
    REQUIRE(::kill(static_cast<pid_t>(pid), SIGKILL) == 0);
    CHECK(f.get() == 2);
    CHECK(lines_in(runs) == 2);
}

TEST_CASE("an at-most-once call queued on a node lost before it started runs on another node",
          "[local][at_most_once]") {
    e2e::TempDir dir;
    sky::ComputePool pool{e2e::quiet(2)};
    // Two nodes with one slot each and four calls: each node gets two, one running and one
    // waiting in its worker (node 0: calls 0 and 3; node 1: calls 1 and 2).
    std::vector<sky::PendingCompute<int>> calls;
    const int ms[] = {60000, 1000, 1000, 0};
    for (int i = 0; i < 4; ++i)
        calls.push_back(sky::compute<marked>(dir.path, i, ms[i]).retries(1).at_most_once());
    std::vector<sky::Future<int>> fs;
    for (auto& c : calls) fs.push_back(pool.submit(c));
    const long pid = first_pid(dir.path + "/0");
    REQUIRE(pid > 0);
    REQUIRE(first_pid(dir.path + "/1") > 0);
    REQUIRE(lines_in(dir.path + "/3") == 0);  // waiting behind call 0
    REQUIRE(::kill(static_cast<pid_t>(pid), SIGKILL) == 0);
    try {
        fs[0].get();
        FAIL("no exception");
    } catch (const sky::NodeLostError& e) {
        CHECK(e.started());
    }
    CHECK(fs[1].get() == 1);
    CHECK(fs[2].get() == 2);
    CHECK(fs[3].get() == 3);
    CHECK(lines_in(dir.path + "/0") == 1);
    REQUIRE(lines_in(dir.path + "/3") == 1);
    CHECK(first_pid(dir.path + "/3") != pid);
}

TEST_CASE("at_most_once is an option of the copy it returns", "[local][at_most_once]") {
    auto p = sky::compute<e2e::add>(1, 2).retries(2).at_most_once();
    CHECK(p.desc().options.at_most_once);
    CHECK_FALSE(sky::compute<e2e::add>(1, 2).retries(2).desc().options.at_most_once);
    sky::ComputePool pool{e2e::quiet(1)};
    CHECK(p >> pool == 3);
}
