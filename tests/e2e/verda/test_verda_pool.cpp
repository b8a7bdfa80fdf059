// sky::Verda end to end: the real cloud layer and adapter against the fake Verda API, whose
// instances are test hosts with a real sshd (the pinned host key from the startup script, the
// registered SSH key authorized, the shipped worker).
#include <catch2/catch.hpp>
#include <cstdlib>
#include <future>
#include <mutex>
#include <set>
#include <thread>

#include "fakes/common/host_binding.hpp"
#include "fakes/verda/fake_verda.hpp"
#include "hosts/test_hosts.hpp"
#include "sky/sky.hpp"

using sky::test::FakeVerda;
using sky::test::FakeVerdaOptions;
using sky::test::HostBinding;
using sky::test::TestHosts;

namespace verda_pool {

const std::string kId = "verda-e2e-client";
const std::string kSecret = "verda-e2e-secret-7d1e55c0";

int node_index() { return sky::instance_info().node; }
int square(int x) { return x * x; }
int slow_node_index(int ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    return sky::instance_info().node;
}

struct Env {
    Env() {
        ::setenv("VERDA_CLIENT_ID", kId.c_str(), 1);
        ::setenv("VERDA_CLIENT_SECRET", kSecret.c_str(), 1);
    }
    ~Env() {
        ::unsetenv("VERDA_CLIENT_ID");
        ::unsetenv("VERDA_CLIENT_SECRET");
    }
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
            CHECK(l.find(kSecret) == std::string::npos);
            CHECK(l.find("PRIVATE KEY") == std::string::npos);
        }
    }
};

FakeVerdaOptions options(HostBinding& binding) {
    FakeVerdaOptions o;
    o.client_id = kId;
    o.client_secret = kSecret;
    o.hosts = &binding;
    return o;
}

sky::PoolSpec spec_for(const FakeVerda& fake, int nodes, Recorder& rec) {
    sky::PoolSpec spec;
    spec.provider = sky::Verda{.endpoint = fake.endpoint()};
    spec.nodes = nodes;
    spec.accelerator = "H100";
    spec.display = sky::Display::quiet;
    spec.on_event = rec.callback();
    return spec;  // spot "always", the default
}

}  // namespace verda_pool

using namespace verda_pool;

TEST_CASE("verda pool: 2 spot H100 instances run a broadcast and a gather, and none is left",
          "[verda_pool]") {
    SKIP_WITHOUT_HOSTS();
    Env env;
    TestHosts hosts(2);
    HostBinding binding(hosts);
    FakeVerda fake(options(binding));
    Recorder rec;
    {
        sky::ComputePool pool{spec_for(fake, 2, rec)};
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
            CHECK(i.provider == "verda");
            CHECK(i.instance_type == "1H100.80S.30V");
            CHECK(i.spot);
            CHECK(i.hourly_price == Approx(0.89));  // the live spot price
            addresses.insert(i.public_ip.value_or(""));
        }
        CHECK(addresses == std::set<std::string>{hosts.address(0), hosts.address(1)});
        CHECK(fake.alive() == 2);
        CHECK(fake.ssh_keys().size() == 1);
        CHECK(fake.scripts().size() == 2);  // one startup script per node (its own host key)
        // The access token expires while the pool runs: teardown renews it and goes on.
        fake.expire_tokens();
    }
    CHECK(fake.alive() == 0);
    CHECK(fake.ssh_keys().empty());
    CHECK(fake.scripts().empty());
    CHECK(fake.refreshes() >= 1);
    CHECK(binding.machines().empty());
    CHECK(sky::test::wait_until([] { return sky::test::remote_workers() == 0; },
                                std::chrono::seconds(10)));
    rec.check_no_secrets();
}

TEST_CASE("verda pool: no availability anywhere is a ProvisionError listing every attempt",
          "[verda_pool]") {
    SKIP_WITHOUT_HOSTS();
    Env env;
    TestHosts hosts(1);
    HostBinding binding(hosts);
    FakeVerda fake(options(binding));
    for (const auto& t : FakeVerda::default_types())
        fake.set_available(t["instance_type"], false, false);
    Recorder rec;
    try {
        sky::ComputePool pool{spec_for(fake, 2, rec)};
        FAIL("a pool came up without capacity");
    } catch (const sky::ProvisionError& e) {
        REQUIRE_FALSE(e.attempts().empty());
        for (const auto& a : e.attempts()) {
            CHECK(a.provider == "verda");
            CHECK(a.error.find("not available") != std::string::npos);
            CHECK(std::string(e.what()).find(a.instance_type) != std::string::npos);
        }
    }
    CHECK(fake.alive() == 0);
    CHECK(fake.ssh_keys().empty());
    CHECK(fake.scripts().empty());
    rec.check_no_secrets();
}

TEST_CASE("verda pool: a reclaimed spot instance is replaced and calls with .retries(1) complete",
          "[verda_pool]") {
    SKIP_WITHOUT_HOSTS();
    Env env;
    TestHosts hosts(2);
    HostBinding binding(hosts);
    FakeVerda fake(options(binding));
    Recorder rec;
    std::string victim, replacement;
    {
        sky::ComputePool pool{spec_for(fake, 2, rec)};
        victim = pool.instances().at(1).id;
        std::vector<sky::PendingCompute<int>> calls;
        for (int i = 0; i < 8; ++i) calls.push_back(sky::compute<slow_node_index>(1500).retries(1));
        auto gather =
            std::async(std::launch::async, [&] { return sky::gather(std::move(calls)) >> pool; });
        std::this_thread::sleep_for(std::chrono::milliseconds(700));
        fake.preempt(victim);
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
    CHECK(fake.alive() == 0);
    rec.check_no_secrets();
}
