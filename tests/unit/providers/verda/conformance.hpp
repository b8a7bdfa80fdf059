#pragma once
/// \file Verda's fixture for the adapter conformance suite (support/adapter_conformance.hpp): the
/// fake Verda API with client credentials, pools of on-demand A100 instances (1A100.80S.22V,
/// then 8A100.80S.176V).
#include "fakes/verda/fake_verda.hpp"
#include "providers/verda/verda.hpp"
#include "support/adapter_test.hpp"

namespace sky::test::conformance {

struct VerdaCloud {
    /// Availability is listed per type and location: nothing is launched when nothing is.
    static constexpr CloudFacts facts{"verda", "1A100.80S.22V", "8A100.80S.176V", true};

    VerdaCloud() : VerdaCloud(FakeVerdaOptions{}) {}
    explicit VerdaCloud(Retired)
        : VerdaCloud(FakeVerdaOptions{.unknown_types = {facts.first_type}}) {}

    sky::PoolSpec spec(int nodes) const { return on_demand_pool(config(), nodes, "A100"); }
    std::unique_ptr<sky::CloudAdapter> adapter() const {
        return sky::detail::make_verda_adapter(config());
    }
    HttpFaultRate launch_fault(FaultKind kind) const {
        return every("POST", "/v1/instances", kind);
    }
    int launches_sent() { return fake.http().count("POST", "/v1/instances"); }
    void exhaust(const std::string& type) { fake.set_available(type, false, false); }
    void sell_nothing() {
        for (const auto& t : FakeVerda::default_types())
            fake.set_available(t["instance_type"], false, false);
    }
    sky::Offer unknown_offer() const {
        sky::Offer o;
        o.provider = facts.provider;
        o.instance_type = "1Z100.12S.4V";
        o.region = "FIN-01";
        return o;
    }
    /// The pool's SSH key and one startup script per machine.
    int infra_things(int machines) const { return 1 + machines; }
    int alive() const { return fake.alive(); }
    std::string left() const {
        std::string out;
        if (!fake.ssh_keys().empty()) out += "an SSH key; ";
        if (!fake.scripts().empty()) out += "a startup script; ";
        return out;
    }
    HttpFake& http() { return fake.http(); }

    FakeVerda fake;
    ScopedEnv creds{{{"VERDA_CLIENT_ID", "verda-client-0001"},
                     {"VERDA_CLIENT_SECRET", "verda-secret-fake-0123456789"}}};

private:
    explicit VerdaCloud(FakeVerdaOptions o) : fake(std::move(o)) {}
    sky::Verda config() const { return sky::Verda{.endpoint = fake.endpoint()}; }
};

}  // namespace sky::test::conformance
