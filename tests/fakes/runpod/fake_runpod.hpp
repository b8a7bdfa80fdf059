#pragma once
/// \file A stateful fake of RunPod's GraphQL API (/graphql; the operations sky uses), on the
/// shared HTTP fake: gpuTypes, podFindAndDeployOnDemand and podRentInterruptable (typed input
/// variables or literals), pod(input: {podId}), myself { pods }, podTerminate. It checks the API
/// key (Bearer or ?api_key=), the operation, the input's field names and enum values and the
/// selected fields, and answers as RunPod does: validation errors as HTTP 400 with
/// extensions.code GRAPHQL_VALIDATION_FAILED or BAD_USER_INPUT, business errors (no capacity, a
/// bid too low) as HTTP 200 with data.<field> null and errors[0].message. runtime is null until a
/// pod is up. Pods are test hosts when a HostBinding is given; interruptible pods can be
/// interrupted. REST v1 (switched off) is not served.
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fakes/common/rest_fake.hpp"

namespace sky::test {

class HostBinding;

struct FakeRunPodOptions {
    std::string api_key = "rpa_FAKE0123456789ABCDEFGHIJ";
    /// gpuTypes; empty: default_gpu_types() (RTX 4090 and H100 80GB HBM3).
    std::vector<nlohmann::json> gpu_types;
    /// GPU type ids that gpuTypes lists, yet a deploy refuses as unknown (retired meanwhile).
    std::set<std::string> unknown_gpu_ids;
    HostBinding* hosts = nullptr;
    /// A pod's runtime is null for this many queries of it, then up with its ports.
    int queries_until_up = 1;
};

class FakeRunPod final : public RestFake {
public:
    /// Its endpoint() is the API host, "http://127.0.0.1:<port>" (GraphQL at /graphql).
    explicit FakeRunPod(FakeRunPodOptions options = {});

    /// Pods a GPU type may still get (absent: any, or the free test hosts).
    void set_capacity(const std::string& gpu_type_id, int pods);
    /// RunPod takes an interruptible pod back: EXITED, runtime null, its host released.
    void interrupt(const std::string& pod_id);

    /// Not terminated (alive() counts them).
    [[nodiscard]] std::vector<nlohmann::json> pods() const { return live_views(); }
    /// The inputs of every deploy mutation, in order.
    [[nodiscard]] std::vector<nlohmann::json> deploy_inputs() const;

    static std::vector<nlohmann::json> default_gpu_types();

private:
    HttpReply graphql(const HttpRequest& r);
    HttpReply deploy(const std::string& field, const nlohmann::json& input);
    nlohmann::json view(const std::string& id) const override;

    FakeRunPodOptions options_;
    std::map<std::string, int> capacity_;
    std::vector<nlohmann::json> inputs_;
    unsigned long next_ = 1;
};

}  // namespace sky::test
