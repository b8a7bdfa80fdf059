// sky::RunPod end to end: the real cloud layer and adapter against the fake RunPod GraphQL API,
// whose pods are test hosts with a real sshd (the pinned host key from the start script in the
// pod's env, PUBLIC_KEY authorized, the shipped worker).
#include <catch2/catch.hpp>
#include <cstdlib>
#include <future>
#include <mutex>
#include <set>
#include <thread>

#include "fakes/common/host_binding.hpp"
#include "fakes/runpod/fake_runpod.hpp"
#include "hosts/test_hosts.hpp"
#include "sky/sky.hpp"

using sky::test::FakeRunPod;
using sky::test::FakeRunPodOptions;
using sky::test::HostBinding;
using sky::test::TestHosts;

namespace runpod_pool {

const std::string kKey = "rpa_E2E_KEY_5C0FFEE0042";

int node_index() { return sky::instance_info().node; }
int square(int x) { return x * x; }
int slow_node_index(int ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    return sky::instance_info().node;
}

struct Env {
    Env() { ::setenv("RUNPOD_API_KEY", kKey.c_str(), 1); }
    ~Env() { ::unsetenv("RUNPOD_API_KEY"); }
};

struct Recorder {
    std::mutex m;
    std::vector<std::string> lines;
    std::vector<sky::Event> events;
    sky::Callback callback() {
        return [this](const sky::Event& e) -> std::optional<sky::Event> {
            std::lock_guard lk(m);
            lines.push_back(sky::describe(e));
            events.push_back(e);
            return std::nullopt;
        };
    }
    template <class T>
    int count() {
        std::lock_guard lk(m);
        int n = 0;
        for (auto& e : events) n += std::holds_alternative<T>(e) ? 1 : 0;
        return n;
    }
    void check_no_secrets() {
        std::lock_guard lk(m);
        for (const auto& l : lines) {
            CHECK(l.find(kKey) == std::string::npos);
            CHECK(l.find("PRIVATE KEY") == std::string::npos);
        }
    }
};

FakeRunPodOptions options(HostBinding& binding) {
    FakeRunPodOptions o;
    o.api_key = kKey;
    o.hosts = &binding;
    return o;
}

sky::PoolSpec spec_for(const FakeRunPod& fake, int nodes, Recorder& rec, sky::Spot spot) {
    sky::PoolSpec spec;
    spec.provider = sky::RunPod{.endpoint = fake.endpoint()};
    spec.nodes = nodes;
    spec.accelerator = "RTX4090";
    spec.spot = spot;
    spec.display = sky::Display::quiet;
    spec.on_event = rec.callback();
    return spec;
}

}  // namespace runpod_pool

using namespace runpod_pool;

TEST_CASE("runpod pool: 2 RTX 4090 pods run a broadcast and a gather, and none is left",
          "[runpod_pool]") {
    SKIP_WITHOUT_HOSTS();
    Env env;
    TestHosts hosts(2);
    HostBinding binding(hosts);
    FakeRunPod fake(options(binding));
    Recorder rec;
    {
        sky::ComputePool pool{spec_for(fake, 2, rec, sky::Spot::Never{})};
        auto nodes = sky::compute<node_index>() | pool;
        std::sort(nodes.begin(), nodes.end());
        CHECK(nodes == std::vector<int>{0, 1});
        std::vector<sky::PendingCompute<int>> calls;
        for (int i = 0; i < 6; ++i) calls.push_back(sky::compute<square>(i));
        CHECK((sky::gather(std::move(calls)) >> pool) == std::vector<int>{0, 1, 4, 9, 16, 25});
        auto inst = pool.instances();
        REQUIRE(inst.size() == 2);
        std::set<std::string> addresses;
        for (const auto& i : inst) {
            CHECK(i.provider == "runpod");
            CHECK(i.instance_type == "1x_RTX4090_SECURE");
            CHECK_FALSE(i.spot);
            addresses.insert(i.public_ip.value_or(""));
        }
        CHECK(addresses == std::set<std::string>{hosts.address(0), hosts.address(1)});
        CHECK(fake.alive() == 2);
        for (const auto& in : fake.deploy_inputs()) {
            CHECK(in["name"].get<std::string>().rfind("sky-" + pool.id(), 0) == 0);
            CHECK(in["ports"] == "22/tcp");
        }
    }
    CHECK(fake.alive() == 0);
    CHECK(binding.machines().empty());
    CHECK(sky::test::wait_until([] { return sky::test::remote_workers() == 0; },
                                std::chrono::seconds(10)));
    rec.check_no_secrets();
}

TEST_CASE("runpod pool: no instances available anywhere is a ProvisionError listing every attempt",
          "[runpod_pool]") {
    SKIP_WITHOUT_HOSTS();
    Env env;
    TestHosts hosts(1);
    HostBinding binding(hosts);
    FakeRunPod fake(options(binding));
    for (const auto& g : FakeRunPod::default_gpu_types()) fake.set_capacity(g["id"], 0);
    Recorder rec;
    try {
        sky::ComputePool pool{spec_for(fake, 2, rec, sky::Spot::Never{})};
        FAIL("a pool came up without capacity");
    } catch (const sky::ProvisionError& e) {
        REQUIRE(e.attempts().size() >= 4);  // 1, 2, 4 and 8 RTX 4090s
        for (const auto& a : e.attempts()) {
            CHECK(a.provider == "runpod");
            CHECK(a.error.find("no longer any instances available") != std::string::npos);
            CHECK(std::string(e.what()).find(a.instance_type) != std::string::npos);
        }
    }
    CHECK(fake.alive() == 0);
    rec.check_no_secrets();
}

TEST_CASE("runpod pool: an interrupted pod is replaced and calls with .retries(1) complete",
          "[runpod_pool]") {
    SKIP_WITHOUT_HOSTS();
    Env env;
    TestHosts hosts(2);
    HostBinding binding(hosts);
    FakeRunPod fake(options(binding));
    Recorder rec;
    std::string victim, replacement;
    {
        sky::ComputePool pool{spec_for(fake, 2, rec, sky::Spot::Always{})};
        REQUIRE(pool.instances().at(1).spot);
        victim = pool.instances().at(1).id;
        std::vector<sky::PendingCompute<int>> calls;
        for (int i = 0; i < 8; ++i) calls.push_back(sky::compute<slow_node_index>(1500).retries(1));
        auto gather =
            std::async(std::launch::async, [&] { return sky::gather(std::move(calls)) >> pool; });
        std::this_thread::sleep_for(std::chrono::milliseconds(700));
        fake.interrupt(victim);
        REQUIRE(gather.wait_for(std::chrono::seconds(240)) == std::future_status::ready);
        CHECK(gather.get().size() == 8);
        for (const auto& i : pool.instances())
            if (i.node == 1) replacement = i.id;
        CHECK_FALSE(replacement.empty());
        CHECK(replacement != victim);
        CHECK((sky::compute<node_index>() | pool).size() == 2);
    }
    CHECK(rec.count<sky::InstancePreempted>() >= 1);
    CHECK(rec.count<sky::InstanceReplaced>() >= 1);
    CHECK(fake.alive() == 0);  // the interrupted (exited) pod was terminated too
    rec.check_no_secrets();
}
