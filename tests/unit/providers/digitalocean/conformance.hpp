#pragma once
/// \file DigitalOcean's fixture for the adapter conformance suite
/// (support/adapter_conformance.hpp): the fake DigitalOcean API with a token, pools of H100
/// droplets in nyc2 (gpu-h100x1-80gb, then gpu-h100x8-640gb).
#include "fakes/digitalocean/fake_digitalocean.hpp"
#include "providers/digitalocean/digitalocean.hpp"
#include "support/adapter_test.hpp"

namespace sky::test::conformance {

struct DigitalOceanCloud {
    /// The sizes list says what is available: nothing is launched when nothing is.
    static constexpr CloudFacts facts{"digitalocean", "gpu-h100x1-80gb", "gpu-h100x8-640gb", true};

    DigitalOceanCloud() : DigitalOceanCloud(FakeDigitalOceanOptions{}) {}
    explicit DigitalOceanCloud(Retired)
        : DigitalOceanCloud(FakeDigitalOceanOptions{.unknown_sizes = {facts.first_type}}) {}

    sky::PoolSpec spec(int nodes) const { return on_demand_pool(config(), nodes, "H100"); }
    std::unique_ptr<sky::CloudAdapter> adapter() const {
        return sky::detail::make_digitalocean_adapter(config());
    }
    HttpFaultRate launch_fault(FaultKind kind) const { return every("POST", "/v2/droplets", kind); }
    int launches_sent() { return fake.http().count("POST", "/v2/droplets"); }
    void exhaust(const std::string& type) { fake.set_capacity(type, 0); }
    void sell_nothing() {
        for (const auto& s : FakeDigitalOcean::default_sizes())
            fake.set_available(s["slug"], false);
    }
    sky::Offer unknown_offer() const {
        sky::Offer o;
        o.provider = facts.provider;
        o.instance_type = "gpu-z100x1-12gb";
        o.region = "nyc2";
        return o;
    }
    /// The account key and the cloud firewall (the pool's tag is what finds its droplets).
    int infra_things(int /*machines*/) const { return 2; }
    int alive() const { return fake.alive(); }
    std::string left() const {
        std::string out;
        if (!fake.keys().empty()) out += "an account key; ";
        if (!fake.firewalls().empty()) out += "a cloud firewall; ";
        for (const auto& t : fake.tags())
            if (t != "sky") out += "tag " + t + "; ";  // "sky" is every pool's: it stays
        return out;
    }
    HttpFake& http() { return fake.http(); }

    FakeDigitalOcean fake;
    ScopedEnv token{{{"DIGITALOCEAN_TOKEN", "dop_v1_fake_token_0123456789abcdef"}}};

private:
    explicit DigitalOceanCloud(FakeDigitalOceanOptions o) : fake(std::move(o)) {}
    sky::DigitalOcean config() const {
        return sky::DigitalOcean{.region = "nyc2", .endpoint = fake.endpoint()};
    }
};

}  // namespace sky::test::conformance
