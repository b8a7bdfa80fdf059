// sky::DigitalOcean end to end: the real cloud layer and adapter against the fake DigitalOcean
// API, whose droplets are test hosts with a real sshd (the pinned host key from user_data, the
// account key authorized, the shipped worker).
#include <catch2/catch.hpp>
#include <cstdlib>
#include <mutex>
#include <set>

#include "fakes/common/host_binding.hpp"
#include "fakes/digitalocean/fake_digitalocean.hpp"
#include "hosts/test_hosts.hpp"
#include "providers/digitalocean/digitalocean.hpp"
#include "sky/sky.hpp"

using sky::test::FakeDigitalOcean;
using sky::test::FakeDigitalOceanOptions;
using sky::test::HostBinding;
using sky::test::TestHosts;

namespace do_pool {

const std::string kToken = "dop_v1_e2e_secret_token_5f2c9a";

int node_index() { return sky::instance_info().node; }
int square(int x) { return x * x; }

struct Env {
    Env() { ::setenv("DIGITALOCEAN_TOKEN", kToken.c_str(), 1); }
    ~Env() { ::unsetenv("DIGITALOCEAN_TOKEN"); }
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
    void check_no_secrets() {
        std::lock_guard lk(m);
        for (const auto& l : lines) {
            CHECK(l.find(kToken) == std::string::npos);
            CHECK(l.find("PRIVATE KEY") == std::string::npos);
        }
    }
};

FakeDigitalOceanOptions options(HostBinding& binding) {
    FakeDigitalOceanOptions o;
    o.token = kToken;
    o.hosts = &binding;
    return o;
}

sky::PoolSpec spec_for(const FakeDigitalOcean& fake, int nodes, Recorder& rec) {
    sky::PoolSpec spec;
    spec.provider = sky::DigitalOcean{.endpoint = fake.endpoint()};
    spec.nodes = nodes;
    spec.accelerator = "H100";
    spec.spot = sky::Spot::Never{};  // DigitalOcean sells no spot capacity
    spec.display = sky::Display::quiet;
    spec.on_event = rec.callback();
    return spec;
}

}  // namespace do_pool

using namespace do_pool;

TEST_CASE("digitalocean pool: 2 H100 droplets run a broadcast and a gather, and none is left",
          "[digitalocean_pool]") {
    SKIP_WITHOUT_HOSTS();
    Env env;
    TestHosts hosts(2);
    HostBinding binding(hosts);
    FakeDigitalOcean fake(options(binding));
    Recorder rec;
    {
        sky::ComputePool pool{spec_for(fake, 2, rec)};
        auto nodes = sky::compute<node_index>() | pool;  // broadcast: one call per node
        std::sort(nodes.begin(), nodes.end());
        CHECK(nodes == std::vector<int>{0, 1});
        std::vector<sky::PendingCompute<int>> calls;
        for (int i = 0; i < 6; ++i) calls.push_back(sky::compute<square>(i));
        auto squares = sky::gather(std::move(calls)) >> pool;
        CHECK(squares == std::vector<int>{0, 1, 4, 9, 16, 25});

        auto inst = pool.instances();
        REQUIRE(inst.size() == 2);
        std::set<std::string> addresses;
        for (const auto& i : inst) {
            CHECK(i.provider == "digitalocean");
            CHECK(i.instance_type == "gpu-h100x1-80gb");
            CHECK_FALSE(i.spot);
            CHECK(i.hourly_price == Approx(6.74));  // the live price from /v2/sizes
            addresses.insert(i.public_ip.value_or(""));
            // The droplet's user_data carried the pinned host key; its tags name the pool.
            CHECK(fake.user_data(i.id).find("SKY_HOST_KEY") != std::string::npos);
        }
        CHECK(addresses == std::set<std::string>{hosts.address(0), hosts.address(1)});
        CHECK(fake.alive() == 2);
        REQUIRE(fake.keys().size() == 1);
        for (const auto& d : fake.droplets()) {
            const auto& tags = d["tags"];
            CHECK(std::find(tags.begin(), tags.end(), "sky-pool-" + pool.id()) != tags.end());
        }
    }
    CHECK(fake.alive() == 0);  // every droplet deleted, confirmed by the fake
    CHECK(fake.keys().empty());
    CHECK(binding.machines().empty());
    CHECK(sky::test::wait_until([] { return sky::test::remote_workers() == 0; },
                                std::chrono::seconds(10)));
    CHECK(fake.auth_failures() == 0);
    rec.check_no_secrets();
}

TEST_CASE("digitalocean pool: no capacity anywhere is a ProvisionError listing every attempt",
          "[digitalocean_pool]") {
    SKIP_WITHOUT_HOSTS();
    Env env;
    TestHosts hosts(1);
    HostBinding binding(hosts);
    FakeDigitalOcean fake(options(binding));
    fake.set_capacity("gpu-h100x1-80gb", 0);
    fake.set_capacity("gpu-h100x8-640gb", 0);
    Recorder rec;
    try {
        sky::ComputePool pool{spec_for(fake, 2, rec)};
        FAIL("a pool came up without capacity");
    } catch (const sky::ProvisionError& e) {
        // Every H100 size in every region that sells it (live) or the catalog lists.
        REQUIRE(e.attempts().size() >= 3);
        std::set<std::string> tried;
        for (const auto& a : e.attempts()) {
            CHECK(a.provider == "digitalocean");
            CHECK_FALSE(a.spot);
            // DigitalOcean's 422: no capacity, or (a catalog row) not sold in that region.
            CHECK((a.error.find("capacity") != std::string::npos ||
                   a.error.find("not available in this region") != std::string::npos));
            tried.insert(a.instance_type + "@" + a.region);
            CHECK(std::string(e.what()).find(a.instance_type) != std::string::npos);
        }
        CHECK(tried.count("gpu-h100x1-80gb@nyc2"));
        CHECK(tried.count("gpu-h100x1-80gb@tor1"));
        CHECK(tried.count("gpu-h100x8-640gb@nyc2"));
    }
    CHECK(fake.alive() == 0);
    CHECK(fake.keys().empty());
    rec.check_no_secrets();
}

TEST_CASE("digitalocean pool: rate limits (429) are waited out", "[digitalocean_pool]") {
    SKIP_WITHOUT_HOSTS();
    Env env;
    TestHosts hosts(1);
    HostBinding binding(hosts);
    FakeDigitalOcean fake(options(binding));
    Recorder rec;
    fake.rate_limit(3);
    {
        sky::ComputePool pool{spec_for(fake, 1, rec)};
        CHECK((sky::compute<square>(7) >> pool) == 49);
    }
    CHECK(fake.alive() == 0);
}

TEST_CASE("digitalocean pool: sky ls lists the pool's droplets and sky gc deletes them",
          "[digitalocean_pool]") {
    SKIP_WITHOUT_HOSTS();
    Env env;
    TestHosts hosts(1);
    HostBinding binding(hosts);
    FakeDigitalOcean fake(options(binding));
    ::setenv("DIGITALOCEAN_API_URL", fake.endpoint().c_str(), 1);
    const auto home = hosts.dir() / "sky-home";  // the CLI's ledgers: not this user's
    ::setenv("SKY_HOME", home.c_str(), 1);
    // A droplet a crashed client left behind: tagged, never deleted.
    {
        auto a = sky::detail::make_digitalocean_adapter(sky::DigitalOcean{});
        auto offers = a->live_offers(sky::Catalog::embedded(), {}, [](sky::Event) {});
        sky::LaunchRequest r;
        r.pool_id = "00112233aabbccdd";
        r.name = "sky-00112233aabbccdd";
        for (const auto& o : offers)
            if (o.instance_type == "s-2vcpu-4gb") r.offer = o;
        r.boot_script = "#!/bin/bash\n";
        (void)a->launch(r);
    }
    REQUIRE(fake.alive() == 1);
    auto ls = sky::test::run_command({SKY_CLI_PATH, "ls", "--provider", "digitalocean"});
    INFO(ls.output);
    CHECK(ls.status == 0);
    CHECK(ls.output.find(fake.droplets().at(0)["id"].dump()) != std::string::npos);
    CHECK(ls.output.find(kToken) == std::string::npos);
    auto doctor = sky::test::run_command({SKY_CLI_PATH, "doctor"});
    INFO(doctor.output);
    CHECK(doctor.output.find("DIGITALOCEAN_TOKEN") != std::string::npos);
    CHECK(doctor.output.find(kToken) == std::string::npos);
    // The droplet's pool has no ledger on this machine: only --include-unknown ends it.
    auto gc = sky::test::run_command(
        {SKY_CLI_PATH, "gc", "--provider", "digitalocean", "--include-unknown"},
        std::chrono::seconds(120));
    INFO(gc.output);
    CHECK(sky::test::wait_until([&] { return fake.alive() == 0; }, std::chrono::seconds(30)));
    ::unsetenv("DIGITALOCEAN_API_URL");
    ::unsetenv("SKY_HOME");
}
