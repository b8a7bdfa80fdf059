// WorkerLaunch: what a launcher writes (an environment, a start script's exports) the worker
// reads back the same; a malformed value is a ConfigError naming the variable.
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/worker_launch.hpp"
#include "sky/errors.hpp"
#include "util/shell.hpp"

using sky::detail::WorkerLaunch;

namespace {

// An environment as a launcher's "NAME=value" entries give it.
std::map<std::string, std::string> as_map(const std::vector<std::string>& entries) {
    std::map<std::string, std::string> m;
    for (const auto& e : entries) {
        const auto eq = e.find('=');
        REQUIRE(eq != std::string::npos);
        REQUIRE(m.emplace(e.substr(0, eq), e.substr(eq + 1)).second);  // each name once
    }
    return m;
}

WorkerLaunch read_back(const std::map<std::string, std::string>& env) {
    return WorkerLaunch::from_env([&](const char* name) -> const char* {
        auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
    });
}

void same(const WorkerLaunch& a, const WorkerLaunch& b) {
    CHECK(a.fd == b.fd);
    CHECK(a.listen == b.listen);
    CHECK(a.token == b.token);
    CHECK(a.token_file == b.token_file);
    CHECK(a.port_file == b.port_file);
    CHECK(a.heartbeat_file == b.heartbeat_file);
    CHECK(a.accept_timeout == b.accept_timeout);
    CHECK(a.crash_file == b.crash_file);
    CHECK(a.parent_pid == b.parent_pid);
    CHECK(a.parent_pool == b.parent_pool);
}

std::string error_of(const std::map<std::string, std::string>& env) {
    try {
        read_back(env);
    } catch (const sky::ConfigError& e) {
        return e.what();
    }
    return "no error";
}

}  // namespace

TEST_CASE("worker launch: a Local worker's environment reads back the same", "[launch]") {
    WorkerLaunch local{
        .fd = 3, .token = "0123456789abcdef", .parent_pid = 4242, .parent_pool = "1a2b3c4d"};
    const auto env = as_map(local.env());
    CHECK(env.size() == 4);
    CHECK(env.at("SKY_WORKER_FD") == "3");
    CHECK(env.at("SKY_WORKER_TOKEN") == "0123456789abcdef");
    CHECK(env.at("SKY_PARENT_PID") == "4242");
    CHECK(env.at("SKY_PARENT_POOL") == "1a2b3c4d");
    CHECK(WorkerLaunch::parent_pool_entry("1a2b3c4d") == "SKY_PARENT_POOL=1a2b3c4d");
    same(read_back(env), local);
}

TEST_CASE("worker launch: a remote worker's exports read back the same, and carry no token",
          "[launch]") {
    WorkerLaunch remote{.listen = "unix:/home/u/.sky/pools/p 1/node0/worker.sock",
                        .token_file = "/home/u/.sky/pools/p 1/node0/token",
                        .port_file = "/home/u/.sky/pools/p 1/node0/port",
                        .heartbeat_file = "/home/u/.sky/pools/p 1/node0/heartbeat",
                        .accept_timeout = std::chrono::seconds(600),
                        .crash_file = "/home/u/.sky/pools/p 1/node0/crash"};
    same(read_back(as_map(remote.env())), remote);
    const std::string line = remote.shell_exports();
    CHECK(line.rfind("export SKY_WORKER_LISTEN='unix:/home/u/.sky/pools/p 1/node0/worker.sock' ",
                     0) == 0);
    CHECK(line.find(" SKY_WORKER_ACCEPT_TIMEOUT='600' ") != std::string::npos);
    CHECK(line.find(" SKY_WORKER_CRASH_FILE='/home/u/.sky/pools/p 1/node0/crash'\n") !=
          std::string::npos);
    CHECK(line.find("SKY_WORKER_TOKEN=") == std::string::npos);
    CHECK(line.back() == '\n');
    CHECK(WorkerLaunch{}.shell_exports().empty());
    // A token never goes into a script.
    WorkerLaunch leaky = remote;
    leaky.token = "secret";
    CHECK_THROWS_AS(leaky.shell_exports(), std::logic_error);
}

TEST_CASE("worker launch: quoting survives what a shell would do with the exports", "[launch]") {
    WorkerLaunch odd{.listen = "127.0.0.1:0", .port_file = "/tmp/it's $HOME `x`/port"};
    const std::string script = odd.shell_exports() + "printf '%s' \"$SKY_WORKER_PORT_FILE\"";
    std::string out;
    FILE* p = ::popen(("env -i /bin/sh -c " + sky::detail::shell_quote(script)).c_str(), "r");
    REQUIRE(p);
    char buf[256];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    CHECK(::pclose(p) == 0);
    CHECK(out == odd.port_file);
}

TEST_CASE("worker launch: nothing set reads back as nothing", "[launch]") {
    const WorkerLaunch none = read_back({});
    same(none, WorkerLaunch{});
    // Empty values count as unset.
    same(read_back({{"SKY_WORKER_FD", ""}, {"SKY_WORKER_TOKEN", ""}}), WorkerLaunch{});
}

TEST_CASE("worker launch: a malformed value is a ConfigError naming the variable", "[launch]") {
    CHECK_THAT(error_of({{"SKY_WORKER_FD", "three"}}),
               Catch::Contains("SKY_WORKER_FD='three' is not a file descriptor"));
    CHECK_THAT(error_of({{"SKY_WORKER_FD", "-1"}}), Catch::Contains("SKY_WORKER_FD='-1'"));
    CHECK_THAT(error_of({{"SKY_WORKER_FD", "3 "}}), Catch::Contains("SKY_WORKER_FD='3 '"));
    CHECK_THAT(error_of({{"SKY_WORKER_ACCEPT_TIMEOUT", "10s"}}),
               Catch::Contains("SKY_WORKER_ACCEPT_TIMEOUT='10s' is not a number of seconds"));
    CHECK_THAT(error_of({{"SKY_WORKER_ACCEPT_TIMEOUT", "0"}}),
               Catch::Contains("SKY_WORKER_ACCEPT_TIMEOUT='0'"));
    CHECK_THAT(error_of({{"SKY_PARENT_PID", "99999999999999999999"}}),
               Catch::Contains("SKY_PARENT_PID="));
    CHECK_THAT(error_of({{"SKY_WORKER_LISTEN", "unix:relative/worker.sock"}}),
               Catch::Contains("SKY_WORKER_LISTEN='unix:relative/worker.sock' is not unix:PATH"));
    CHECK_THAT(error_of({{"SKY_WORKER_LISTEN", "unix:/" + std::string(200, 'a')}}),
               Catch::Contains("shorter than 108 bytes"));
    CHECK_THAT(error_of({{"SKY_WORKER_LISTEN", "127.0.0.1"}}),
               Catch::Contains("SKY_WORKER_LISTEN='127.0.0.1' is not HOST:PORT"));
    CHECK_THAT(error_of({{"SKY_WORKER_LISTEN", "127.0.0.1:70000"}}),
               Catch::Contains("a port from 0 to 65535"));
    // A control character in a value is not echoed as is.
    CHECK_THAT(error_of({{"SKY_WORKER_FD", "1\x1b[2J"}}), Catch::Contains("SKY_WORKER_FD='1?[2J'"));
    // Well-formed values of the same variables pass.
    CHECK(error_of({{"SKY_WORKER_FD", "3"},
                    {"SKY_WORKER_ACCEPT_TIMEOUT", "20"},
                    {"SKY_PARENT_PID", "1"},
                    {"SKY_WORKER_LISTEN", "127.0.0.1:0"}}) == "no error");
}

TEST_CASE("worker launch: a worker needs a token and a connection", "[launch]") {
    auto complete = [](const WorkerLaunch& l) -> std::string {
        try {
            l.check_complete();
        } catch (const sky::ConfigError& e) {
            return e.what();
        }
        return "complete";
    };
    CHECK(complete(WorkerLaunch{.fd = 3, .token = "t"}) == "complete");
    CHECK(complete(WorkerLaunch{.listen = "127.0.0.1:0", .token_file = "/f"}) == "complete");
    CHECK_THAT(complete(WorkerLaunch{.fd = 3}),
               Catch::Contains("SKY_WORKER_TOKEN or SKY_WORKER_TOKEN_FILE"));
    CHECK_THAT(complete(WorkerLaunch{.token = "t"}),
               Catch::Contains("SKY_WORKER_FD or SKY_WORKER_LISTEN"));
    CHECK_THAT(complete(WorkerLaunch{}), Catch::Contains("a worker needs"));
}

TEST_CASE("worker launch: a launcher passes none of its own variables on", "[launch]") {
    CHECK(WorkerLaunch::is_launch_variable("SKY_WORKER_FD=3"));
    CHECK(WorkerLaunch::is_launch_variable("SKY_WORKER_TOKEN=x"));
    CHECK(WorkerLaunch::is_launch_variable("SKY_WORKER_SOMETHING_NEW=1"));
    CHECK(WorkerLaunch::is_launch_variable("SKY_PARENT_PID=12"));
    CHECK(WorkerLaunch::is_launch_variable("SKY_PARENT_PID"));
    CHECK(WorkerLaunch::is_launch_variable("SKY_PARENT_POOL=1a2b3c4d"));
    CHECK_FALSE(WorkerLaunch::is_launch_variable("SKY_PARENT_PIDS=1"));
    CHECK_FALSE(WorkerLaunch::is_launch_variable("SKY_SIMULATED=preempt"));
    CHECK_FALSE(WorkerLaunch::is_launch_variable("PATH=/usr/bin"));
    // Every variable env() writes is one a launcher strips.
    WorkerLaunch all{.fd = 3,
                     .listen = "127.0.0.1:0",
                     .token = "t",
                     .token_file = "/f",
                     .port_file = "/p",
                     .heartbeat_file = "/h",
                     .accept_timeout = std::chrono::seconds(5),
                     .parent_pid = 7,
                     .parent_pool = "1a2b3c4d"};
    const auto entries = all.env();
    CHECK(entries.size() == 9);
    for (const auto& e : entries) CHECK(WorkerLaunch::is_launch_variable(e));
    same(read_back(as_map(entries)), all);
}

TEST_CASE("worker launch: the token is wiped from the environment", "[launch]") {
    ::setenv("SKY_WORKER_TOKEN", "wipe-me", 1);
    ::setenv("SKY_WORKER_TOKEN_FILE", "/tmp/x", 1);
    char* value = std::getenv("SKY_WORKER_TOKEN");
    REQUIRE(value);
    const std::string before = value;
    WorkerLaunch::erase_token_from_env();
    CHECK(std::getenv("SKY_WORKER_TOKEN") == nullptr);
    CHECK(std::getenv("SKY_WORKER_TOKEN_FILE") == nullptr);
    CHECK(before == "wipe-me");
    // The value itself is overwritten where it was (glibc keeps what setenv allocated): a core
    // file or a look at the process's memory finds zeros.
    CHECK(std::string(value, before.size()) == std::string(before.size(), '\0'));
}
