// Distributed training end to end: what every plugin sets (and unsets), one worker process per
// GPU or MIG slice, ranks in order, on Local nodes and on SSH test hosts. GPUs come from
// nvidia-smi stand-ins on the workers' PATH (nvidia-smi-4gpu, nvidia-smi-mig in this folder).
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "hosts/ssh_provider.hpp"
#include "hosts/test_hosts.hpp"
#include "sky/sky.hpp"
#include "support/scoped_env.hpp"

namespace fs = std::filesystem;
using Env = std::map<std::string, std::string>;

namespace dist {

const std::vector<std::string> all_names = {"MASTER_ADDR",
                                            "MASTER_PORT",
                                            "WORLD_SIZE",
                                            "RANK",
                                            "LOCAL_RANK",
                                            "LOCAL_WORLD_SIZE",
                                            "NODE_RANK",
                                            "GLOO_SOCKET_IFNAME",
                                            "NCCL_SOCKET_IFNAME",
                                            "SKY_DISTRIBUTED_BACKEND",
                                            "JAX_COORDINATOR_ADDRESS",
                                            "JAX_NUM_PROCESSES",
                                            "JAX_PROCESS_ID",
                                            "TF_CONFIG",
                                            "KERAS_BACKEND"};

// What this call sees of the rendezvous variables, and where it runs.
Env env_now() {
    Env e;
    for (auto& k : all_names)
        if (const char* v = std::getenv(k.c_str())) e[k] = v;
    const char* cuda = std::getenv("CUDA_VISIBLE_DEVICES");
    e["@cuda"] = cuda ? cuda : "<unset>";
    e["@pid"] = std::to_string(::getpid());
    auto info = sky::instance_info();
    e["@node"] = std::to_string(info.node);
    e["@worker"] = std::to_string(info.worker);
    e["@wpn"] = std::to_string(info.workers_per_node);
    e["@head_port"] = std::to_string(info.head_port);
    auto acc = sky::current_accelerator();
    e["@acc"] = acc ? acc->to_string() : "";
    return e;
}
int plus_one(int x) { return x + 1; }
sky::InstanceInfo info() { return sky::instance_info(); }
sky::Accelerator accelerator() { return sky::current_accelerator().value_or(sky::Accelerator{}); }

sky::PoolSpec local_spec(int nodes) {
    return {.provider = sky::Local{}, .nodes = nodes, .display = sky::Display::quiet};
}

// A PATH on which `nvidia-smi` is the stand-in `which` (in a directory of its own).
struct StandIn {
    fs::path dir;
    explicit StandIn(const std::string& which) {
        char tmpl[] = "/tmp/sky-dist-XXXXXX";
        dir = ::mkdtemp(tmpl);
        fs::copy_file(fs::path(SKY_STANDIN_DIR) / which, dir / "nvidia-smi");
    }
    ~StandIn() {
        std::error_code ec;
        fs::remove_all(dir, ec);
    }
    [[nodiscard]] std::string path() const {
        const char* p = std::getenv("PATH");
        return dir.string() + ":" + (p ? p : "/usr/bin:/bin");
    }
};

}  // namespace dist

using namespace dist;

TEST_CASE("torch: every rank gets torchrun's variables, only while the call runs",
          "[distributed][local]") {
    auto spec = local_spec(3);
    spec.env = {{"MASTER_PORT", "1"}};  // the pool's own value comes back after the call
    sky::ComputePool pool{spec};
    auto envs = sky::compute<env_now>().with(sky::distributed::torch{.backend = "gloo"}) | pool;
    REQUIRE(envs.size() == 3);
    const std::string port = envs[0].at("MASTER_PORT");
    CHECK(std::stoi(port) > 1024);
    for (int r = 0; r < 3; ++r) {
        auto& e = envs[static_cast<std::size_t>(r)];
        CHECK(e.at("MASTER_ADDR") == "127.0.0.1");
        CHECK(e.at("MASTER_PORT") == port);
        CHECK(e.at("@head_port") == port);
        CHECK(e.at("WORLD_SIZE") == "3");
        CHECK(e.at("RANK") == std::to_string(r));
        CHECK(e.at("LOCAL_RANK") == "0");
        CHECK(e.at("LOCAL_WORLD_SIZE") == "1");
        CHECK(e.at("NODE_RANK") == std::to_string(r));
        CHECK(e.at("@node") == std::to_string(r));
        CHECK(e.at("GLOO_SOCKET_IFNAME") == "lo");
        CHECK(e.at("NCCL_SOCKET_IFNAME") == "lo");
        CHECK(e.at("SKY_DISTRIBUTED_BACKEND") == "gloo");
        CHECK(e.count("TF_CONFIG") == 0);
    }
    // A later call without .with() sees none of them; the pool's MASTER_PORT is back.
    for (auto& e : sky::compute<env_now>() | pool) {
        CHECK(e.at("MASTER_PORT") == "1");
        for (auto& k : all_names)
            if (k != "MASTER_PORT") CHECK(e.count(k) == 0);
    }
    // `>>` with a plugin runs once, as one of the ranks.
    auto one = sky::compute<env_now>().with(sky::distributed::torch{}) >> pool;
    CHECK(one.at("RANK") == one.at("@node"));
    CHECK(one.at("SKY_DISTRIBUTED_BACKEND") == "nccl");
}

TEST_CASE("jax, tensorflow, keras and transformers set their frameworks' variables",
          "[distributed][local]") {
    sky::ComputePool pool{local_spec(2)};
    auto infos = sky::compute<info>() | pool;
    REQUIRE(infos.size() == 2);
    for (auto& i : infos) {
        CHECK(i.private_addr == "127.0.0.1");
        CHECK(i.peers == std::vector<std::string>{"127.0.0.1", "127.0.0.1"});
        CHECK(i.head_addr == "127.0.0.1");
        CHECK(i.head_port > 0);
        CHECK(i.workers_per_node == 1);
    }
    const std::string head = "127.0.0.1:" + std::to_string(infos[0].head_port);

    auto jax = sky::compute<env_now>().with(sky::distributed::jax{}) | pool;
    for (int r = 0; r < 2; ++r) {
        auto& e = jax[static_cast<std::size_t>(r)];
        CHECK(e.at("JAX_COORDINATOR_ADDRESS") == head);
        CHECK(e.at("JAX_NUM_PROCESSES") == "2");
        CHECK(e.at("JAX_PROCESS_ID") == std::to_string(r));
        CHECK(e.count("MASTER_ADDR") == 0);
    }

    auto tf = sky::compute<env_now>().with(sky::distributed::tensorflow{}) | pool;
    for (int r = 0; r < 2; ++r) {
        auto j = nlohmann::json::parse(tf[static_cast<std::size_t>(r)].at("TF_CONFIG"));
        auto workers = j.at("cluster").at("worker").get<std::vector<std::string>>();
        REQUIRE(workers.size() == 2);
        CHECK(workers[0] == head);
        CHECK(workers[1].rfind("127.0.0.1:", 0) == 0);
        CHECK(workers[0] != workers[1]);
        CHECK(j.at("task").at("type") == "worker");
        CHECK(j.at("task").at("index") == r);
    }

    auto keras_torch =
        sky::compute<env_now>().with(sky::distributed::keras{.backend = "torch"}) | pool;
    CHECK(keras_torch[1].at("KERAS_BACKEND") == "torch");
    CHECK(keras_torch[1].at("RANK") == "1");
    CHECK(keras_torch[1].count("JAX_PROCESS_ID") == 0);
    auto keras_jax = sky::compute<env_now>().with(sky::distributed::keras{}) | pool;
    CHECK(keras_jax[0].at("KERAS_BACKEND") == "jax");
    CHECK(keras_jax[0].at("JAX_COORDINATOR_ADDRESS") == head);
    auto keras_tf =
        sky::compute<env_now>().with(sky::distributed::keras{.backend = "tensorflow"}) | pool;
    CHECK(keras_tf[1].at("KERAS_BACKEND") == "tensorflow");
    CHECK(keras_tf[1].count("TF_CONFIG") == 1);

    auto hf = sky::compute<env_now>().with(sky::distributed::transformers{}) | pool;
    CHECK(hf[1].at("MASTER_ADDR") == "127.0.0.1");
    CHECK(hf[1].at("WORLD_SIZE") == "2");
    CHECK(hf[1].at("RANK") == "1");

    for (auto& e : sky::compute<env_now>() | pool)
        for (auto& k : all_names) CHECK(e.count(k) == 0);
}

TEST_CASE("a plugin with an unknown backend is a ConfigError at .with()", "[distributed]") {
    CHECK_THROWS_AS(sky::compute<plus_one>(1).with(sky::distributed::torch{.backend = "tcp"}),
                    sky::ConfigError);
    CHECK_THROWS_AS(sky::compute<plus_one>(1).with(sky::distributed::keras{.backend = "mxnet"}),
                    sky::ConfigError);
    auto p = sky::compute<plus_one>(1);
    auto q = p.with(sky::distributed::jax{});
    CHECK(p.desc().options.plugin.kind == sky::detail::PluginSpec::none);  // a modified copy
    CHECK(q.desc().options.plugin.kind == sky::detail::PluginSpec::jax);
}

TEST_CASE("an accelerator with 2 GPUs gives 2 worker processes per node, one rank each",
          "[distributed][local]") {
    auto spec = local_spec(3);
    spec.accelerator = "T4:2";
    sky::ComputePool pool{spec};
    auto envs = sky::compute<env_now>().with(sky::distributed::torch{.backend = "gloo"}) | pool;
    REQUIRE(envs.size() == 6);
    std::set<std::string> pids;
    for (int r = 0; r < 6; ++r) {
        auto& e = envs[static_cast<std::size_t>(r)];
        INFO("rank " << r);
        CHECK(e.at("RANK") == std::to_string(r));
        CHECK(e.at("WORLD_SIZE") == "6");
        CHECK(e.at("LOCAL_RANK") == std::to_string(r % 2));
        CHECK(e.at("LOCAL_WORLD_SIZE") == "2");
        CHECK(e.at("NODE_RANK") == std::to_string(r / 2));
        CHECK(e.at("@worker") == std::to_string(r % 2));
        CHECK(e.at("@wpn") == "2");
        CHECK(e.at("@cuda") == std::to_string(r % 2));
        CHECK(e.at("@acc") == "T4:2");
        pids.insert(e.at("@pid"));
    }
    CHECK(pids.size() == 6);  // a process per GPU: CUDA reads CUDA_VISIBLE_DEVICES once
    // Without a plugin a broadcast is still once per node, and plain calls use every process.
    CHECK((sky::compute<info>() | pool).size() == 3);
    std::vector<sky::PendingCompute<int>> many;
    for (int i = 0; i < 40; ++i) many.push_back(sky::compute<plus_one>(i));
    auto out = sky::gather(std::move(many)) >> pool;
    for (int i = 0; i < 40; ++i) CHECK(out[static_cast<std::size_t>(i)] == i + 1);
    auto acc = sky::compute<accelerator>() >> pool;
    CHECK(acc == sky::Accelerator::parse("T4:2"));
}

TEST_CASE("current_accelerator() carries count, memory and the MIG profile losslessly",
          "[distributed][local]") {
    auto spec = local_spec(1);
    spec.accelerator = sky::accelerators::A100({.memory = "80GB", .mig = "3g.40gb"});
    const int per_gpu = sky::workers_per_device(*spec.accelerator);
    REQUIRE(per_gpu == 2);
    sky::ComputePool pool{spec};
    auto acc = sky::compute<accelerator>() >> pool;
    CHECK(acc == *spec.accelerator);
    CHECK(acc.memory == std::optional<std::string>("80GB"));
    CHECK(acc.mig == std::optional<std::string>("3g.40gb"));
    // No MIG slices to list here (no nvidia-smi): W from the profile, pinned to the GPU.
    auto envs = sky::compute<env_now>().with(sky::distributed::torch{}) | pool;
    REQUIRE(envs.size() == 2);
    CHECK(envs[1].at("LOCAL_RANK") == "1");
    CHECK(envs[1].at("@cuda") == "0");
}

TEST_CASE("nvidia-smi decides W when the spec names no accelerator (4 GPUs, MIG slices)",
          "[distributed][local]") {
    {
        StandIn smi("nvidia-smi-4gpu");
        auto spec = local_spec(2);
        spec.env = {{"PATH", smi.path()}};
        sky::ComputePool pool{spec};
        auto envs = sky::compute<env_now>().with(sky::distributed::torch{}) | pool;
        REQUIRE(envs.size() == 8);
        for (int r = 0; r < 8; ++r) {
            auto& e = envs[static_cast<std::size_t>(r)];
            CHECK(e.at("RANK") == std::to_string(r));
            CHECK(e.at("@cuda") == std::to_string(r % 4));
            CHECK(e.at("@acc") == "H100:4");
        }
        auto acc = sky::compute<accelerator>() >> pool;
        CHECK(acc.name == "H100");
        CHECK(acc.count == 4);
        CHECK(acc.memory == std::optional<std::string>("80GB"));
        auto i = sky::compute<info>() >> pool;
        CHECK(i.accelerators == std::vector<std::string>(4, "H100"));
        CHECK(i.workers_per_node == 4);
    }
    {
        StandIn smi("nvidia-smi-mig");
        auto spec = local_spec(1);
        spec.env = {{"PATH", smi.path()}};
        sky::ComputePool pool{spec};
        auto envs = sky::compute<env_now>().with(sky::distributed::torch{}) | pool;
        REQUIRE(envs.size() == 4);
        CHECK(envs[0].at("@cuda") == "MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f");
        CHECK(envs[1].at("@cuda") == "MIG-cba663e8-9bed-5b25-b243-5985ef7c9beb");
        CHECK(envs[3].at("@cuda") == "MIG-6e7f8a9b-0c1d-5e2f-a3b4-c5d6e7f8a9b0");
        auto acc = sky::compute<accelerator>() >> pool;
        CHECK(acc.name == "A100");
        CHECK(acc.count == 2);
        CHECK(acc.memory == std::optional<std::string>("80GB"));
        CHECK(acc.mig == std::optional<std::string>("3g.40gb"));
    }
}

TEST_CASE("a worker process that crashes takes its node down, and the pool replaces it",
          "[distributed][local]") {
    auto spec = local_spec(1);
    spec.accelerator = "T4:2";
    sky::ComputePool pool{spec};
    auto before = sky::compute<env_now>().with(sky::distributed::torch{}) | pool;
    REQUIRE(before.size() == 2);
    ::kill(std::stoi(before[1].at("@pid")), SIGKILL);
    // The node comes back (replaced), with fresh worker processes and ports.
    std::vector<Env> after;
    for (int i = 0; i < 100 && after.empty(); ++i) {
        try {
            after = sky::compute<env_now>().with(sky::distributed::torch{}) | pool;
        } catch (const sky::NodeLostError&) {
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
    }
    REQUIRE(after.size() == 2);
    CHECK(after[1].at("@pid") != before[1].at("@pid"));
    CHECK(after[1].at("RANK") == "1");
}

namespace dist {
int* volatile null_target = nullptr;
// Rank 1 writes through a null pointer; the others wait for the node to go down.
__attribute__((noinline)) int segv_on_rank_1() {
    if (std::string(std::getenv("RANK") ? std::getenv("RANK") : "") == "1") *null_target = 1;
    std::this_thread::sleep_for(std::chrono::seconds(30));
    return 0;
}
}  // namespace dist

TEST_CASE("a worker process's crash report reaches the client through its node's worker",
          "[distributed][local][forensics]") {
    // The crash files go under TMPDIR (one directory per Local worker): none is left after.
    char tmp[] = "/tmp/sky-dist-crash-XXXXXX";
    REQUIRE(::mkdtemp(tmp));
    {
        sky::test::ScopedEnv env({{"TMPDIR", tmp}});
        auto spec = local_spec(1);
        spec.accelerator = "T4:2";
        sky::ComputePool pool{spec};
        try {
            (void)(sky::compute<dist::segv_on_rank_1>().with(sky::distributed::torch{}) | pool);
            FAIL("no exception");
        } catch (const sky::NodeLostError& e) {
            INFO(e.what());
            CHECK(e.reason() == sky::NodeLostError::Reason::worker_crashed);
            CHECK(e.signal() == SIGSEGV);
            REQUIRE_FALSE(e.stack().empty());
            CHECK(e.stack().front().function.find("dist::segv_on_rank_1") != std::string::npos);
            CHECK(e.stack().front().file.find("test_distributed.cpp") != std::string::npos);
        }
    }
    CHECK(fs::is_empty(tmp));
    fs::remove_all(tmp);
}

// ---- SSH test hosts ----

namespace dist {
sky::PoolSpec ssh_spec(const sky::test::TestHosts& h) {
    sky::SSH ssh = sky::test::ssh_provider(h);
    return {.provider = ssh, .nodes = h.size(), .display = sky::Display::quiet};
}
// Puts the stand-in `which` at /root/bin/nvidia-smi on host i.
void install_standin(const sky::test::TestHosts& h, int i, const std::string& which) {
    const fs::path bin = h.host_path(i, "/root/bin");
    fs::create_directories(bin);
    fs::copy_file(fs::path(SKY_STANDIN_DIR) / which, bin / "nvidia-smi",
                  fs::copy_options::overwrite_existing);
}
}  // namespace dist

TEST_CASE("ssh hosts: a 4-GPU host and a MIG host, one rank per GPU or slice, in rank order",
          "[distributed][ssh]") {
    SKIP_WITHOUT_HOSTS();
    sky::test::TestHosts hosts(2);
    install_standin(hosts, 0, "nvidia-smi-4gpu");
    install_standin(hosts, 1, "nvidia-smi-mig");
    auto spec = ssh_spec(hosts);
    spec.env = {{"PATH", "/root/bin:/usr/local/bin:/usr/bin:/bin"}};
    sky::ComputePool pool{spec};
    auto infos = sky::compute<info>() | pool;
    REQUIRE(infos.size() == 2);
    for (int n = 0; n < 2; ++n) {
        auto& i = infos[static_cast<std::size_t>(n)];
        CHECK(i.private_addr == hosts.address(n));
        CHECK(i.peers == std::vector<std::string>{hosts.address(0), hosts.address(1)});
    }
    CHECK(infos[0].workers_per_node == 4);
    CHECK(infos[1].workers_per_node == 4);
    auto envs = sky::compute<env_now>().with(sky::distributed::torch{.backend = "gloo"}) | pool;
    REQUIRE(envs.size() == 8);
    const std::string port = envs[0].at("MASTER_PORT");
    std::set<std::string> ifnames;
    for (int r = 0; r < 8; ++r) {
        auto& e = envs[static_cast<std::size_t>(r)];
        INFO("rank " << r);
        CHECK(e.at("MASTER_ADDR") == hosts.address(0));
        CHECK(e.at("MASTER_PORT") == port);
        CHECK(e.at("RANK") == std::to_string(r));
        CHECK(e.at("WORLD_SIZE") == "8");
        CHECK(e.at("NODE_RANK") == std::to_string(r / 4));
        CHECK(e.at("LOCAL_RANK") == std::to_string(r % 4));
        CHECK(!e.at("GLOO_SOCKET_IFNAME").empty());
        CHECK(e.at("GLOO_SOCKET_IFNAME") != "lo");
        CHECK(e.at("NCCL_SOCKET_IFNAME") == e.at("GLOO_SOCKET_IFNAME"));
        ifnames.insert(e.at("GLOO_SOCKET_IFNAME"));
    }
    CHECK(envs[2].at("@cuda") == "2");
    CHECK(envs[0].at("@acc") == "H100:4");
    CHECK(envs[4].at("@cuda") == "MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f");
    CHECK(envs[7].at("@cuda") == "MIG-6e7f8a9b-0c1d-5e2f-a3b4-c5d6e7f8a9b0");
    auto mig = sky::Accelerator::parse(envs[5].at("@acc"));
    CHECK(mig.name == "A100");
    CHECK(mig.mig == std::optional<std::string>("3g.40gb"));
    CHECK(mig.count == 2);
    // TF_CONFIG lists the 8 ranks at their hosts' addresses.
    auto tf = sky::compute<env_now>().with(sky::distributed::tensorflow{}) | pool;
    auto j = nlohmann::json::parse(tf[6].at("TF_CONFIG"));
    auto workers = j.at("cluster").at("worker").get<std::vector<std::string>>();
    REQUIRE(workers.size() == 8);
    CHECK(workers[0].rfind(hosts.address(0) + ":", 0) == 0);
    CHECK(workers[7].rfind(hosts.address(1) + ":", 0) == 0);
    CHECK(std::set<std::string>(workers.begin(), workers.end()).size() == 8);
    CHECK(j.at("task").at("index") == 6);
}
