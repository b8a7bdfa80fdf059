#pragma once
/// \file Vast.ai's fixture for the adapter conformance suite (support/adapter_conformance.hpp):
/// the fake Vast.ai marketplace with an API key, pools of on-demand RTX 4090 asks (1x-RTX4090,
/// then 2x-RTX4090).
#include "fakes/vastai/fake_vastai.hpp"
#include "providers/vastai/vastai.hpp"
#include "support/adapter_test.hpp"

namespace sky::test::conformance {

struct VastCloud {
    /// The marketplace's search lists what is rentable: nothing is rented when nothing is.
    static constexpr CloudFacts facts{"vastai", "1x-RTX4090", "2x-RTX4090", true};

    VastCloud() = default;

    sky::PoolSpec spec(int nodes) const { return on_demand_pool(config(), nodes, "RTX4090"); }
    std::unique_ptr<sky::CloudAdapter> adapter() const {
        return sky::detail::make_vastai_adapter(config());
    }
    HttpFaultRate launch_fault(FaultKind kind) const {
        return every("PUT", "/api/v0/asks/{id}/", kind);
    }
    int launches_sent() { return fake.http().count("PUT", "/api/v0/asks/{id}/"); }
    /// Every ask of that shape is rented by someone else.
    void exhaust(const std::string& type) {
        for (const auto& a : FakeVast::default_offers())
            if (type == std::to_string(a["num_gpus"].get<int>()) + "x-RTX4090" &&
                a["gpu_name"] == "RTX 4090")
                fake.take(a["id"].dump());
    }
    void sell_nothing() {
        for (const auto& a : FakeVast::default_offers()) fake.take(a["id"].dump());
    }
    sky::Offer unknown_offer() const {
        sky::Offer o;
        o.provider = facts.provider;
        o.instance_type = "RTX4090";  // no "<count>x-": not a marketplace shape
        return o;
    }
    /// The pool's SSH key (found by its comment).
    int infra_things(int /*machines*/) const { return 1; }
    int alive() const { return fake.alive(); }
    std::string left() const { return fake.ssh_keys().empty() ? "" : "an SSH key; "; }
    HttpFake& http() { return fake.http(); }

    FakeVast fake;
    ScopedEnv key{{{"VAST_API_KEY", "vast-fake-key-6a8b0f1c2d"}}};

private:
    sky::VastAI config() const { return sky::VastAI{.endpoint = fake.endpoint()}; }
};

}  // namespace sky::test::conformance
