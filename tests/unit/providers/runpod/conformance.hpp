#pragma once
/// \file RunPod's fixture for the adapter conformance suite (support/adapter_conformance.hpp):
/// the fake RunPod GraphQL API with an API key, listing two A100 GPU types (secure cloud, on
/// demand): pools of 1x_A100-40GB_SECURE, then 1x_A100-80GB_SECURE.
#include "fakes/runpod/fake_runpod.hpp"
#include "providers/runpod/runpod.hpp"
#include "support/adapter_test.hpp"

namespace sky::test::conformance {

struct RunPodCloud {
    /// gpuTypes lists types, not stock: a deploy is how RunPod says there is none.
    static constexpr CloudFacts facts{"runpod", "1x_A100-40GB_SECURE", "1x_A100-80GB_SECURE",
                                      false};

    RunPodCloud() : RunPodCloud(FakeRunPodOptions{.gpu_types = a100s()}) {}
    explicit RunPodCloud(Retired)
        : RunPodCloud(FakeRunPodOptions{.gpu_types = a100s(), .unknown_gpu_ids = {kA100_40}}) {}

    sky::PoolSpec spec(int nodes) const { return on_demand_pool(config(), nodes, "A100"); }
    std::unique_ptr<sky::CloudAdapter> adapter() const {
        return sky::detail::make_runpod_adapter(config());
    }
    HttpFaultRate launch_fault(FaultKind kind) const {
        return every("POST", "/graphql", kind, is_deploy);
    }
    int launches_sent() {
        int n = 0;
        for (const auto& q : fake.http().requests()) n += is_deploy(q) ? 1 : 0;
        return n;
    }
    void exhaust(const std::string& type) {
        fake.set_capacity(type == facts.first_type ? kA100_40 : kA100_80, 0);
    }
    void sell_nothing() {
        fake.set_capacity(kA100_40, 0);
        fake.set_capacity(kA100_80, 0);
    }
    sky::Offer unknown_offer() const {
        sky::Offer o;
        o.provider = facts.provider;
        o.instance_type = "1x_Z100-12GB_SECURE";
        return o;
    }
    /// RunPod has none: the pool's key travels in each pod's environment.
    int infra_things(int /*machines*/) const { return 0; }
    int alive() const { return fake.alive(); }
    std::string left() const { return ""; }
    HttpFake& http() { return fake.http(); }

    /// A GPU type as gpuTypes lists it: secure cloud only, on demand only, one GPU at most.
    static nlohmann::json gpu_type(const std::string& id, int memory_gb, double price) {
        return {{"id", id},
                {"displayName", id},
                {"manufacturer", "Nvidia"},
                {"memoryInGb", memory_gb},
                {"maxGpuCount", 1},
                {"secureCloud", true},
                {"communityCloud", false},
                {"securePrice", price},
                {"communityPrice", nullptr},
                {"secureSpotPrice", nullptr},
                {"communitySpotPrice", nullptr}};
    }

    FakeRunPod fake;
    ScopedEnv key{{{"RUNPOD_API_KEY", "rpa_FAKE0123456789ABCDEFGHIJ"}}};

private:
    static constexpr const char* kA100_40 = "NVIDIA A100-SXM4-40GB";
    static constexpr const char* kA100_80 = "NVIDIA A100 80GB PCIe";

    explicit RunPodCloud(FakeRunPodOptions o) : fake(std::move(o)) {}
    sky::RunPod config() const { return sky::RunPod{.endpoint = fake.endpoint()}; }
    static std::vector<nlohmann::json> a100s() {
        return {gpu_type(kA100_40, 40, 2.5), gpu_type(kA100_80, 80, 3.0)};
    }
    static bool is_deploy(const HttpRequest& q) {
        return q.body.find("podFindAndDeployOnDemand") != std::string::npos ||
               q.body.find("podRentInterruptable") != std::string::npos;
    }
};

}  // namespace sky::test::conformance
