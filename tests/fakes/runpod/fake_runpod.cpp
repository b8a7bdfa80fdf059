// The fake RunPod GraphQL API. Operations, inputs and selections from runpod/runpod-python
// (api/queries/pods.py, gpus.py, api/mutations/pods.py) and SkyPilot's podRentInterruptable;
// error shapes from RunPod's GraphQL server (Apollo: extensions.code).
#include "fakes/runpod/fake_runpod.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <regex>
#include <set>

#include "util/encoding.hpp"

namespace sky::test {

namespace {

using nlohmann::json;

HttpReply validation(const std::string& message,
                     const std::string& code = "GRAPHQL_VALIDATION_FAILED") {
    return {400,
            json{{"errors", {{{"message", message}, {"extensions", {{"code", code}}}}}}}.dump()};
}

HttpReply business(const std::string& field, const std::string& message) {
    return {200, json{{"data", {{field, nullptr}}},
                      {"errors",
                       {{{"message", message},
                         {"path", {field}},
                         {"extensions", {{"code", "INTERNAL_SERVER_ERROR"}}}}}}}
                     .dump()};
}

// Every field name a selection may use on the types sky's operations return.
const std::set<std::string>& selectable() {
    static const std::set<std::string> s = {
        // Pod
        "id", "name", "desiredStatus", "podType", "costPerHr", "adjustedCostPerHr", "gpuCount",
        "imageName", "machineId", "lastStatusChange", "env", "containerDiskInGb", "dockerArgs",
        "dockerId", "memoryInGb", "port", "ports", "uptimeSeconds", "vcpuCount", "volumeInGb",
        "volumeMountPath", "runtime", "machine", "podHostId", "gpuDisplayName",
        // PodRuntime and its ports
        "uptimeInSeconds", "ip", "isIpPublic", "privatePort", "publicPort", "type", "gpus",
        // GpuType
        "displayName", "manufacturer", "memoryInGb", "maxGpuCount", "secureCloud", "communityCloud",
        "securePrice", "communityPrice", "secureSpotPrice", "communitySpotPrice", "oneMonthPrice",
        "threeMonthPrice", "oneWeekPrice", "cudaCores", "maxGpuCountCommunityCloud",
        "maxGpuCountSecureCloud", "minPodGpuCount", "sixMonthPrice", "lowestPrice",
        "minimumBidPrice", "uninterruptablePrice", "stockStatus",
        // roots
        "pod", "pods", "myself", "gpuTypes", "podFindAndDeployOnDemand", "podRentInterruptable",
        "podTerminate", "input", "query", "mutation", "podId", "gpuCount"};
    return s;
}

// The identifiers of a query outside string literals and argument lists.
std::optional<std::string> unknown_field(const std::string& q) {
    std::string plain;
    bool in_string = false;
    int parens = 0;
    for (std::size_t i = 0; i < q.size(); ++i) {
        char c = q[i];
        if (in_string) {
            if (c == '\\')
                ++i;
            else if (c == '"')
                in_string = false;
            continue;
        }
        if (c == '"')
            in_string = true;
        else if (c == '(')
            ++parens;
        else if (c == ')')
            --parens;
        else if (parens == 0)
            plain += c;
    }
    static const std::regex ident("[A-Za-z_][A-Za-z0-9_]*");
    // The operation's own name (query Foo) is free.
    std::string rest = std::regex_replace(
        plain, std::regex("^\\s*(query|mutation)\\s+[A-Za-z_][A-Za-z0-9_]*"), "$1");
    for (std::sregex_iterator it(rest.begin(), rest.end(), ident), end; it != end; ++it)
        if (!selectable().count(it->str())) return it->str();
    return std::nullopt;
}

const std::set<std::string>& deploy_fields() {
    static const std::set<std::string> f = {"name",
                                            "imageName",
                                            "cloudType",
                                            "startSsh",
                                            "startJupyter",
                                            "gpuTypeId",
                                            "supportPublicIp",
                                            "gpuCount",
                                            "volumeInGb",
                                            "minVcpuCount",
                                            "minMemoryInGb",
                                            "allowedCudaVersions",
                                            "dataCenterId",
                                            "dockerArgs",
                                            "countryCode",
                                            "containerDiskInGb",
                                            "ports",
                                            "volumeMountPath",
                                            "env",
                                            "templateId",
                                            "networkVolumeId",
                                            "minDownload",
                                            "minUpload",
                                            "cudaVersion",
                                            "terminateAfter",
                                            "stopAfter",
                                            "volumeKey",
                                            "deployCost"};
    return f;
}

}  // namespace

std::vector<json> FakeRunPod::default_gpu_types() {
    return {{{"id", "NVIDIA GeForce RTX 4090"},
             {"displayName", "RTX 4090"},
             {"manufacturer", "Nvidia"},
             {"memoryInGb", 24},
             {"maxGpuCount", 8},
             {"secureCloud", true},
             {"communityCloud", true},
             {"securePrice", 0.69},
             {"communityPrice", 0.34},
             {"secureSpotPrice", 0.35},
             {"communitySpotPrice", 0.2}},
            {{"id", "NVIDIA H100 80GB HBM3"},
             {"displayName", "H100 SXM"},
             {"manufacturer", "Nvidia"},
             {"memoryInGb", 80},
             {"maxGpuCount", 8},
             {"secureCloud", true},
             {"communityCloud", false},
             {"securePrice", 2.99},
             {"communityPrice", nullptr},
             {"secureSpotPrice", 1.75},
             {"communitySpotPrice", nullptr}}};
}

FakeRunPod::FakeRunPod(FakeRunPodOptions options)
    : RestFake("cloudflare", "", options.hosts), options_(std::move(options)) {
    if (options_.gpu_types.empty()) options_.gpu_types = default_gpu_types();
    http_.route("POST", "/graphql", [this](const HttpRequest& r) { return graphql(r); });
}

HttpReply FakeRunPod::graphql(const HttpRequest& r) {
    if (!has_key(r, options_.api_key, true)) return json_reply(401, {{"error", "Unauthorized"}});
    json b = json::parse(r.body, nullptr, false);
    if (!b.is_object() || !b.contains("query") || !b["query"].is_string())
        return validation("POST body must be a JSON object with a \"query\" string", "BAD_REQUEST");
    const std::string q = b["query"];
    const json vars = b.value("variables", json::object());
    if (auto bad = unknown_field(q))
        return validation(fmt::format("Cannot query field \"{}\" here.", *bad));

    std::smatch m;
    for (const char* field : {"podFindAndDeployOnDemand", "podRentInterruptable"}) {
        if (q.find(field) == std::string::npos) continue;
        const std::string type = std::string(field) == "podRentInterruptable"
                                     ? "PodRentInterruptableInput"
                                     : "PodFindAndDeployOnDemandInput";
        json input;
        if (std::regex_search(q, m, std::regex("\\$(\\w+)\\s*:\\s*(\\w+)!?"))) {
            if (m[2] != type)
                return validation(
                    fmt::format("Variable \"${}\" of type \"{}\" used in position "
                                "expecting type \"{}!\".",
                                m[1].str(), m[2].str(), type));
            if (!vars.contains(m[1].str()) || !vars[m[1].str()].is_object())
                return validation(fmt::format("Variable \"${}\" of required type \"{}!\" was not "
                                              "provided.",
                                              m[1].str(), type),
                                  "BAD_USER_INPUT");
            input = vars[m[1].str()];
        } else {
            return validation("this fake takes the deploy input as a typed variable only");
        }
        for (auto& [k, v] : input.items()) {
            if (!deploy_fields().count(k) &&
                !(k == "bidPerGpu" && type == "PodRentInterruptableInput"))
                return validation(
                    fmt::format("Variable \"$input\" got invalid value; Field \"{}\" is "
                                "not defined by type \"{}\".",
                                k, type),
                    "BAD_USER_INPUT");
        }
        if (input.contains("cloudType") &&
            (!input["cloudType"].is_string() ||
             !std::set<std::string>{"ALL", "SECURE", "COMMUNITY"}.count(input["cloudType"])))
            return validation(
                "Variable \"$input\" got invalid value; Value for cloudType must be "
                "ALL, SECURE or COMMUNITY.",
                "BAD_USER_INPUT");
        if (input.contains("env")) {
            if (!input["env"].is_array())
                return validation("env must be a list of {key, value}", "BAD_USER_INPUT");
            for (const auto& e : input["env"])
                if (!e.is_object() || e.size() != 2 || !e.contains("key") || !e.contains("value") ||
                    !e["key"].is_string() || !e["value"].is_string())
                    return validation("Field \"env\": each item takes key and value strings",
                                      "BAD_USER_INPUT");
        }
        for (const char* k :
             {"gpuCount", "volumeInGb", "containerDiskInGb", "minVcpuCount", "minMemoryInGb"})
            if (input.contains(k) && !input[k].is_number_integer())
                return validation(
                    fmt::format("Int cannot represent non-integer value: {}", input[k].dump()),
                    "BAD_USER_INPUT");
        if (type == "PodRentInterruptableInput" &&
            (!input.contains("bidPerGpu") || !input["bidPerGpu"].is_number()))
            return validation("Field \"bidPerGpu\" of required type \"Float!\" was not provided.",
                              "BAD_USER_INPUT");
        return deploy(field, input);
    }
    if (q.find("podTerminate") != std::string::npos) {
        if (!std::regex_search(q, m, std::regex("podId\\s*:\\s*\"([^\"]+)\"")))
            return validation("podTerminate needs input: {podId}", "BAD_USER_INPUT");
        std::lock_guard lk(m_);
        if (!live(m[1])) return business("podTerminate", "pod not found");
        remove_machine(m[1]);
        return {200, json{{"data", {{"podTerminate", nullptr}}}}.dump()};
    }
    if (q.find("gpuTypes") != std::string::npos)
        return {200, json{{"data", {{"gpuTypes", options_.gpu_types}}}}.dump()};
    if (q.find("myself") != std::string::npos) {
        const json list = live_views();
        return {200, json{{"data", {{"myself", {{"id", "user_fake"}, {"pods", list}}}}}}.dump()};
    }
    if (std::regex_search(
            q, m,
            std::regex(
                "pod\\s*\\(\\s*input\\s*:\\s*\\{\\s*podId\\s*:\\s*\"([^\"]+)\"\\s*\\}\\s*\\)"))) {
        std::lock_guard lk(m_);
        FakeMachine* p = live(m[1]);
        if (!p) return {200, json{{"data", {{"pod", nullptr}}}}.dump()};
        ++p->polls;
        return {200, json{{"data", {{"pod", view(m[1])}}}}.dump()};
    }
    return validation("Cannot query this operation in the fake RunPod API.");
}

HttpReply FakeRunPod::deploy(const std::string& field, const json& input) {
    const std::string gpu = input.value("gpuTypeId", "");
    auto type = std::find_if(options_.gpu_types.begin(), options_.gpu_types.end(),
                             [&](const json& g) { return g["id"] == gpu; });
    if (type == options_.gpu_types.end() || options_.unknown_gpu_ids.count(gpu))
        return business(field, "Invalid GPU type: " + gpu);
    const std::string cloud = input.value("cloudType", "ALL");
    std::lock_guard lk(m_);
    inputs_.push_back(input);
    const std::string none =
        "There are no longer any instances available with the requested specifications. "
        "Please refresh and try again.";
    if (cloud == "SECURE" && !(*type)["secureCloud"].get<bool>()) return business(field, none);
    if (cloud == "COMMUNITY" && !(*type)["communityCloud"].get<bool>())
        return business(field, none);
    if (field == "podRentInterruptable") {
        const auto& spot = (*type)[cloud == "COMMUNITY" ? "communitySpotPrice" : "secureSpotPrice"];
        if (spot.is_number() && input["bidPerGpu"].get<double>() + 1e-9 < spot.get<double>())
            return business(field,
                            fmt::format("Your bid price of ${:.3f}/hr is below the minimum "
                                        "bid of ${:.3f}/hr.",
                                        input["bidPerGpu"].get<double>(), spot.get<double>()));
    }
    if (auto c = capacity_.find(gpu); c != capacity_.end()) {
        if (c->second <= 0) return business(field, none);
        --c->second;
    }
    const std::string id = fmt::format("{:x}{}", 0x5e1f00 + next_++, "pod0xq");
    // The boot script is the container's arguments and environment; PUBLIC_KEY is authorized.
    std::string text = input.value("dockerArgs", "");
    std::vector<std::string> keys;
    json env = json::array();  // a Pod's env reads back as "KEY=value" strings
    for (const auto& e : input.value("env", json::array())) {
        text += "\n" + e["value"].get<std::string>();
        if (e["key"] == "PUBLIC_KEY") keys = {e["value"].get<std::string>()};
        env.push_back(e["key"].get<std::string>() + "=" + e["value"].get<std::string>());
    }
    FakeMachine* made =
        add_machine(id, text, keys, "194.68.245.10", 22000 + static_cast<int>(next_));
    if (!made) return business(field, none);
    FakeMachine& p = *made;
    const bool spot = field == "podRentInterruptable";
    p.body = {
        {"id", id},
        {"name", input.value("name", "")},
        {"desiredStatus", "RUNNING"},
        {"podType", spot ? "INTERRUPTABLE" : "RESERVED"},
        {"costPerHr",
         spot ? input["bidPerGpu"].get<double>() * input.value("gpuCount", 1)
              : (*type)[cloud == "COMMUNITY" ? "communityPrice" : "securePrice"].get<double>() *
                    input.value("gpuCount", 1)},
        {"gpuCount", input.value("gpuCount", 1)},
        {"imageName", input.value("imageName", "")},
        {"machineId", "m" + id.substr(0, 6)},
        {"lastStatusChange", "Rented by User: Mon Nov 23 2026 10:00:00 GMT+0000"},
        {"env", env},
        {"runtime", nullptr}};
    return {200, json{{"data",
                       {{field,
                         {{"id", id},
                          {"desiredStatus", "RUNNING"},
                          {"imageName", p.body["imageName"]},
                          {"machineId", p.body["machineId"]}}}}}}
                     .dump()};
}

json FakeRunPod::view(const std::string& id) const {
    const FakeMachine& p = machines_.at(id);
    json v = p.body;
    if (p.reclaimed) {
        v["desiredStatus"] = "EXITED";
    } else if (p.polls > options_.queries_until_up) {
        v["runtime"] = {{"uptimeInSeconds", 12},
                        {"ports",
                         {{{"ip", p.ip},
                           {"isIpPublic", true},
                           {"privatePort", 22},
                           {"publicPort", p.port},
                           {"type", "tcp"}},
                          {{"ip", "100.65.0.2"},
                           {"isIpPublic", false},
                           {"privatePort", 22},
                           {"publicPort", 22},
                           {"type", "tcp"}}}}};
    }
    return v;
}

void FakeRunPod::set_capacity(const std::string& gpu, int pods) {
    std::lock_guard lk(m_);
    capacity_[gpu] = pods;
}

void FakeRunPod::interrupt(const std::string& id) { reclaim(id); }

std::vector<json> FakeRunPod::deploy_inputs() const {
    std::lock_guard lk(m_);
    return inputs_;
}

}  // namespace sky::test
