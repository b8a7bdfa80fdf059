// SKY_SIMULATED switches faults on without recompiling; `sky ls` / `sky gc` see simulated
// machines (through the provider's descriptor, as the CLI does), in this process and another.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "e2e/simulated/functions.hpp"
#include "providers/registry/registry.hpp"
#include "providers/simulated/simulated.hpp"

extern char** environ;

using namespace simtest;
using namespace std::chrono_literals;

TEST_CASE("SKY_SIMULATED switches faults on without recompiling", "[simulated][env]") {
    ScopedEnv env("SKY_SIMULATED",
                  R"({"faults":[{"kind":"preempt","node":0,"after_ms":300}],"seed":3})");
    Recorder rec;
    {
        // The program's own cloud has no faults; the environment adds one.
        sky::ComputePool pool{simulated(sky::Simulated{}, 1, rec)};
        const std::string victim = pool.instances().at(0).id;
        CHECK_THROWS_AS(sky::compute<node_after>(5000) >> pool, sky::NodeLostError);
        REQUIRE(eventually([&] { return rec.all<sky::InstanceReplaced>().size() == 1; }, 20s));
        auto preempted = rec.all<sky::InstancePreempted>();
        REQUIRE(preempted.size() == 1);
        CHECK(preempted[0].instance_id == victim);
    }
    CHECK(children() == 0);
}

TEST_CASE("SKY_SIMULATED adds capacity errors", "[simulated][env]") {
    ScopedEnv env("SKY_SIMULATED", R"({"capacity_errors": 1000})");
    Recorder rec;
    CHECK_THROWS_AS(sky::ComputePool(simulated({}, 1, rec, "never")), sky::ProvisionError);
    CHECK(children() == 0);
}

TEST_CASE("a malformed SKY_SIMULATED is a ConfigError that says what is wrong",
          "[simulated][env]") {
    Recorder rec;
    auto error_for = [&](const std::string& json) -> std::string {
        ScopedEnv env("SKY_SIMULATED", json);
        try {
            sky::ComputePool pool{simulated({}, 2, rec)};
        } catch (const sky::ConfigError& e) {
            return e.what();
        } catch (const std::exception& e) {
            return std::string("not a ConfigError: ") + e.what();
        }
        return "no error";
    };
    CHECK_THAT(error_for("{\"faults\": [}"),
               Catch::Contains("SKY_SIMULATED") && Catch::Contains("not valid JSON"));
    CHECK_THAT(error_for("[1]"), Catch::Contains("must be a JSON object"));
    CHECK_THAT(error_for(R"({"capacity_error": 2})"),
               Catch::Contains("unknown key \"capacity_error\""));
    CHECK_THAT(error_for(R"({"capacity_errors": -2})"), Catch::Contains("capacity_errors"));
    CHECK_THAT(error_for(R"({"faults":[{"kind":"preempt","node":1,"after":3000}]})"),
               Catch::Contains("faults[0]") && Catch::Contains("unknown key \"after\""));
    CHECK_THAT(error_for(R"({"faults":[{"kind":"explode","node":1}]})"),
               Catch::Contains("unknown kind \"explode\""));
    CHECK_THAT(error_for(R"({"faults":[{"kind":"lose_after_calls","node":1}]})"),
               Catch::Contains("needs \"calls\""));
    CHECK_THAT(error_for(R"({"faults":[{"kind":"preempt","node":7,"after_ms":1}]})"),
               Catch::Contains("names node 7"));
    CHECK_THAT(error_for(R"({"faults":[{"kind":"fail_bootstrap","node":0,"message":5}]})"),
               Catch::Contains("message must be a string"));
    CHECK(children() == 0);
}

TEST_CASE("a wrongly typed SKY_SIMULATED value is echoed bounded, whatever its size or depth",
          "[simulated][env][security]") {
    // Review r4 I4: the whole value was echoed through a recursive dump.
    Recorder rec;
    auto error_for = [&](const std::string& json) -> std::string {
        ScopedEnv env("SKY_SIMULATED", json);
        try {
            sky::ComputePool pool{simulated({}, 2, rec)};
        } catch (const sky::ConfigError& e) {
            return e.what();
        }
        return "no error";
    };
    const std::string deep = std::string(20000, '[') + std::string(20000, ']');
    const std::string e1 = error_for(R"({"seed": )" + deep + "}");
    CHECK_THAT(e1, Catch::Contains("seed") && Catch::Contains("an array of 1"));
    CHECK(e1.size() < 300);
    const std::string long_text = "\"" + std::string(100000, 'x') + "\"";
    const std::string e2 =
        error_for(R"({"faults":[{"kind":"fail_bootstrap","node":0,"message":)" + deep + "}]}");
    CHECK(e2.size() < 300);
    const std::string e3 = error_for(R"({"seed": )" + long_text + "}");
    CHECK_THAT(e3, Catch::Contains("seed") && Catch::Contains("..."));
    CHECK(e3.size() < 300);
    CHECK(children() == 0);
}

TEST_CASE("SKY_SIMULATED merges into the program's configuration", "[simulated][env]") {
    using sky::detail::with_simulated_env;
    sky::Simulated mine{.capacity_errors = 1, .faults = {sky::Fault::lose(0, 1s)}, .seed = 9};
    auto merged = with_simulated_env(
        mine, R"({"capacity_errors":3,"faults":[{"kind":"slow_bootstrap","node":1,"delay_ms":20},
                  {"kind":"freeze","node":0,"after_ms":5}]})");
    CHECK(merged.capacity_errors == 3);
    CHECK(merged.seed == 9);
    REQUIRE(merged.faults.size() == 3);
    CHECK(merged.faults[0].kind == sky::Fault::Kind::lose);
    CHECK(merged.faults[1].kind == sky::Fault::Kind::slow_bootstrap);
    CHECK(merged.faults[1].delay == 20ms);
    CHECK(merged.faults[2].kind == sky::Fault::Kind::freeze);
    CHECK(merged.faults[2].after == 5ms);
    CHECK(with_simulated_env(mine, "  ").faults.size() == 1);  // blank: nothing added
}

TEST_CASE("sky ls sees a running simulated pool's machines, and nothing after it",
          "[simulated][ls]") {
    const auto* d = sky::detail::find_provider("simulated");
    REQUIRE(d);
    REQUIRE(d->make_adapter);
    auto adapter = d->make_adapter("");  // what `sky ls` and `sky gc` use
    CHECK(adapter->region() == "us-east-1");
    Recorder rec;
    std::vector<std::string> ids;
    std::string pool_id;
    {
        sky::ComputePool pool{simulated({}, 2, rec)};
        pool_id = pool.id();
        for (const auto& i : pool.instances()) ids.push_back(i.id);
        std::set<std::string> listed;
        for (const auto& m : adapter->list("")) {
            listed.insert(m.id);
            if (m.pool_id == pool_id) CHECK(m.state == sky::CloudInstance::State::running);
        }
        for (const auto& id : ids) CHECK(listed.count(id) == 1);
        for (const auto& m : adapter->describe(ids))
            CHECK(m.state == sky::CloudInstance::State::running);
    }
    CHECK(adapter->list(pool_id).empty());
    for (const auto& m : adapter->describe(ids))
        CHECK((m.state == sky::CloudInstance::State::gone ||
               m.state == sky::CloudInstance::State::unknown));
    CHECK(children() == 0);
}

TEST_CASE("sky gc: a killed client's simulated machines are gone with it", "[simulated][gc]") {
    const auto dir = std::filesystem::temp_directory_path() /
                     ("sky-simtest-orphan-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::string file = (dir / "ids").string();
    std::string self = "/proc/self/exe";
    std::vector<std::string> args = {self, "--orphan-client", file};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t child = -1;
    REQUIRE(::posix_spawn(&child, self.c_str(), nullptr, nullptr, argv.data(), environ) == 0);
    struct Reap {
        pid_t pid;
        std::filesystem::path dir;
        std::string pool_id{};
        ~Reap() {
            ::kill(pid, SIGKILL);
            int st = 0;
            ::waitpid(pid, &st, 0);
            std::error_code ec;
            std::filesystem::remove_all(dir, ec);
            // The killed client's key directory, which `sky gc` removes for a collected pool.
            if (pool_id.empty()) return;
            const std::string prefix = "sky-simulated-" + pool_id + "-";
            for (auto& e :
                 std::filesystem::directory_iterator(std::filesystem::temp_directory_path(), ec))
                if (e.path().filename().string().rfind(prefix, 0) == 0)
                    std::filesystem::remove_all(e.path(), ec);
        }
    } reap{child, dir};
    REQUIRE(eventually([&] { return std::filesystem::exists(file); }, 60s));
    std::ifstream in(file);
    std::string pool_id;
    std::getline(in, pool_id);
    reap.pool_id = pool_id;
    std::vector<std::string> ids;
    for (std::string l; std::getline(in, l);) ids.push_back(l);
    REQUIRE(ids.size() == 2);
    auto adapter = sky::detail::find_provider("simulated")->make_adapter("");
    // While the client runs, its machines are listed under its pool.
    auto listed = adapter->list(pool_id);
    CHECK(listed.size() == 2);
    // The client is killed: its workers die with it, and the cloud says so.
    ::kill(child, SIGKILL);
    int st = 0;
    ::waitpid(child, &st, 0);
    CHECK(eventually(
        [&] {
            for (const auto& m : adapter->describe(ids))
                if (m.state != sky::CloudInstance::State::gone &&
                    m.state != sky::CloudInstance::State::unknown)
                    return false;
            return true;
        },
        10s));
    CHECK(adapter->list(pool_id).empty());
    adapter->terminate(ids);  // what `sky gc` does with what is left: nothing to kill
    CHECK(adapter->list("").empty());
}
