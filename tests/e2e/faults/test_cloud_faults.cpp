// The fault matrix over every cloud fake (issue 12): each fault kind at 30% of the API's
// requests, a 2-node pool on test hosts that runs a broadcast and a gather. Each cell must end in
// correct results or in the typed error its kind allows, within its wall-clock bound, with no
// credential in any message, and with 0 live instances at the fake once the pool is gone.
// SKY_FAULT_SEED=<n> replays a run (each fake prints its seed); SKY_FAULT_KINDS=stall,capacity
// runs only those kinds.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "fakes/common/fault_rate.hpp"
#include "fakes/common/host_binding.hpp"
#include "fakes/digitalocean/fake_digitalocean.hpp"
#include "fakes/ec2/fake_ec2.hpp"
#include "fakes/runpod/fake_runpod.hpp"
#include "fakes/vastai/fake_vastai.hpp"
#include "fakes/verda/fake_verda.hpp"
#include "hosts/test_hosts.hpp"
#include "sky/sky.hpp"

using namespace std::chrono_literals;
using sky::test::FaultKind;
using sky::test::HttpFaultRate;
using sky::test::HttpReply;
using sky::test::HttpRequest;
using sky::test::TestHosts;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

namespace faults {

int node_index() { return sky::instance_info().node; }
int square(int x) { return x * x; }

constexpr double kRate = 0.3;
// Every attempt of an API call gives up after this long (SKY_HTTP_ATTEMPT_TIMEOUT_MS): a stalled
// answer costs this, not the default minute.
constexpr const char* kAttemptTimeoutMs = "2000";

// The bound each cell's pool (start, calls, teardown) must end within: the behaviour asserted is
// "never hangs". A stall costs one attempt timeout per stalled request; the rest cost backoffs.
std::chrono::seconds bound_for(FaultKind k) {
    return k == FaultKind::stall ? std::chrono::seconds(90) : std::chrono::seconds(60);
}

// Sets variables for the test's duration, restoring what was there.
class ScopedEnv {
public:
    void set(const std::string& name, const std::string& value) {
        const char* old = std::getenv(name.c_str());
        saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
        ::setenv(name.c_str(), value.c_str(), 1);
    }
    ~ScopedEnv() {
        for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
            if (it->second) {
                ::setenv(it->first.c_str(), it->second->c_str(), 1);
            } else {
                ::unsetenv(it->first.c_str());
            }
        }
    }

private:
    std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// Every event's text, to search for secrets.
struct Recorder {
    std::mutex m;
    std::vector<std::string> lines;
    sky::Callback callback() {
        return [this](const sky::Event& e) -> std::optional<sky::Event> {
            std::lock_guard lk(m);
            lines.push_back(sky::describe(e));
            return std::nullopt;
        };
    }
};

// One cloud fake, bound to test hosts, seen through what the matrix needs.
struct Cloud {
    virtual ~Cloud() = default;
    [[nodiscard]] virtual sky::PoolSpec spec() const = 0;
    /// Adds a rate of this one kind (capacity only on the launch request) at `probability`;
    /// returns the seed.
    virtual std::uint64_t add_rate(FaultKind kind, std::uint64_t seed, double probability) = 0;
    virtual void clear_rates() = 0;
    [[nodiscard]] virtual int hits(FaultKind kind) const = 0;
    /// Machines the fake holds that are not terminated (or terminating).
    [[nodiscard]] virtual int live() const = 0;
    /// Every credential the pool was given: none may appear in a message.
    [[nodiscard]] virtual std::vector<std::string> secrets() const = 0;
};

sky::PoolSpec base_spec(sky::Provider provider, const char* accelerator) {
    sky::PoolSpec spec;
    spec.provider = std::move(provider);
    spec.nodes = 2;
    spec.accelerator = accelerator;
    spec.spot = sky::Spot::Never{};
    spec.display = sky::Display::quiet;
    spec.collect_metrics = false;
    return spec;
}

// The generic rate of an HttpFake cloud (HttpCloud narrows the capacity kind to the launch call).
HttpFaultRate http_rate(FaultKind kind, std::uint64_t seed, double probability) {
    HttpFaultRate r;
    r.kinds = {kind};
    r.probability = probability;
    r.seed = seed;
    return r;
}

// --- EC2 ----------------------------------------------------------------------------------

std::string testdata(const std::string& rel) {
    const char* dir = std::getenv("SKY_TESTDATA_DIR");
    return std::string(dir && *dir ? dir : SKY_TESTDATA_DIR) + "/" + rel;
}

struct Ec2Cloud : Cloud {
    const std::string key = "AKIDSKYFAULTMATRIX01";
    const std::string secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYFAULTSECRET";
    ScopedEnv env;
    std::unique_ptr<sky::test::FakeEc2> fake;
    explicit Ec2Cloud(TestHosts& hosts) {
        env.set("AWS_ACCESS_KEY_ID", key);
        env.set("AWS_SECRET_ACCESS_KEY", secret);
        env.set("SKY_AWS_SSH_USER", "root");
        ::unsetenv("AWS_SESSION_TOKEN");
        sky::test::FakeEc2Options o;
        if (std::filesystem::exists(testdata("ec2-instance-types/accelerated-instance-types.json")))
            o.instance_types_path = testdata("ec2-instance-types/accelerated-instance-types.json");
        o.access_key_id = key;
        o.secret_access_key = secret;
        o.model_path = testdata("ec2-model/service-2.json");
        o.hosts = &hosts;
        fake = std::make_unique<sky::test::FakeEc2>(o);
    }
    sky::PoolSpec spec() const override {
        return base_spec(sky::AWS{.region = "us-east-1", .endpoint = fake->endpoint()}, "A100");
    }
    std::uint64_t add_rate(FaultKind kind, std::uint64_t seed, double probability) override {
        return fake->add_fault_rate({.kinds = {kind}, .probability = probability, .seed = seed});
    }
    void clear_rates() override { fake->clear_fault_rates(); }
    int hits(FaultKind kind) const override { return fake->fault_hits(kind); }
    int live() const override {
        int n = 0;
        for (const auto& i : fake->instances()) {
            const std::string s = i["State"]["Name"];
            if (s != "terminated" && s != "shutting-down") ++n;
        }
        return n;
    }
    std::vector<std::string> secrets() const override { return {secret}; }
};

// --- the REST clouds on HttpFake ----------------------------------------------------------------

// A REST cloud's fake; what is its own is set by its constructor: the credentials, the fake, and
// how the cloud answers a capacity or an expired-credentials fault (and which request, its
// launch, a capacity fault hits: `faults`' method, path and `when`).
template <class Fake>
struct HttpCloud : Cloud {
    ScopedEnv env;
    sky::test::HostBinding binding;
    std::unique_ptr<Fake> fake;
    HttpFaultRate faults;
    std::string secret;
    explicit HttpCloud(TestHosts& hosts) : binding(hosts) {}
    std::uint64_t add_rate(FaultKind kind, std::uint64_t seed, double probability) override {
        auto r = http_rate(kind, seed, probability);
        if (kind == FaultKind::capacity) {
            r.method = faults.method;
            r.path = faults.path;
            r.when = faults.when;
        }
        r.capacity = faults.capacity;
        r.expired_auth = faults.expired_auth;
        return fake->http().add_fault_rate(std::move(r));
    }
    void clear_rates() override { fake->http().clear_fault_rates(); }
    int hits(FaultKind kind) const override { return fake->http().fault_hits(kind); }
    int live() const override { return fake->alive(); }
    std::vector<std::string> secrets() const override { return {secret}; }
};

struct RunPodCloud : HttpCloud<sky::test::FakeRunPod> {
    explicit RunPodCloud(TestHosts& hosts) : HttpCloud(hosts) {
        secret = "rpa_FAULTMATRIX_KEY_77E1";
        env.set("RUNPOD_API_KEY", secret);
        sky::test::FakeRunPodOptions o;
        o.api_key = secret;
        o.hosts = &binding;
        fake = std::make_unique<sky::test::FakeRunPod>(o);
        faults.when = [](const HttpRequest& q) {  // the deploy mutations, on /graphql
            return q.body.find("podFindAndDeployOnDemand") != std::string::npos ||
                   q.body.find("podRentInterruptable") != std::string::npos;
        };
        // RunPod's business errors: HTTP 200, data.<mutation> null, errors[0].message.
        faults.capacity = [](const HttpRequest& q) {
            const std::string field = q.body.find("podRentInterruptable") != std::string::npos
                                          ? "podRentInterruptable"
                                          : "podFindAndDeployOnDemand";
            return HttpReply{
                200, json{{"data", {{field, nullptr}}},
                          {"errors",
                           {{{"message",
                              "There are no longer any instances available with the requested "
                              "specifications. Please refresh and try again."},
                             {"path", {field}}}}}}
                         .dump()};
        };
        faults.expired_auth = [](const HttpRequest&) {
            return HttpReply{401, json{{"error", "Unauthorized"}}.dump()};
        };
    }
    sky::PoolSpec spec() const override {
        return base_spec(sky::RunPod{.endpoint = fake->endpoint()}, "RTX4090");
    }
};

struct VastCloud : HttpCloud<sky::test::FakeVast> {
    explicit VastCloud(TestHosts& hosts) : HttpCloud(hosts) {
        secret = "vast-faultmatrix-key-3b9d0e";
        env.set("VAST_API_KEY", secret);
        sky::test::FakeVastOptions o;
        o.api_key = secret;
        o.hosts = &binding;
        fake = std::make_unique<sky::test::FakeVast>(o);
        faults.method = "PUT";
        faults.path = "/api/v0/asks/{id}/";
        // Vast.ai's answer for an ask rented by someone else between search and rent.
        faults.capacity = [](const HttpRequest& q) {
            return HttpReply{410,
                             json{{"success", false},
                                  {"error", "no_such_ask"},
                                  {"msg", "Ask " + (q.params.count("id") ? q.params.at("id") : "") +
                                              " is no longer available"}}
                                 .dump()};
        };
        faults.expired_auth = [](const HttpRequest&) {
            return HttpReply{
                401, json{{"detail", "Authentication credentials were not provided."}}.dump()};
        };
    }
    sky::PoolSpec spec() const override {
        return base_spec(sky::VastAI{.endpoint = fake->endpoint()}, "RTX4090");
    }
};

struct VerdaCloud : HttpCloud<sky::test::FakeVerda> {
    explicit VerdaCloud(TestHosts& hosts) : HttpCloud(hosts) {
        const std::string id = "verda-faultmatrix-client";
        secret = "verda-faultmatrix-secret-c0ffee11";
        env.set("VERDA_CLIENT_ID", id);
        env.set("VERDA_CLIENT_SECRET", secret);
        sky::test::FakeVerdaOptions o;
        o.client_id = id;
        o.client_secret = secret;
        o.hosts = &binding;
        fake = std::make_unique<sky::test::FakeVerda>(o);
        faults.method = "POST";
        faults.path = "/v1/instances";
        faults.capacity = [](const HttpRequest&) {
            return HttpReply{503, json{{"code", "no_capacity"},
                                       {"message", "Not enough capacity for this instance type"}}
                                      .dump()};
        };
        faults.expired_auth = [](const HttpRequest&) {
            return HttpReply{
                401, json{{"code", "unauthorized_request"}, {"message", "Access token is expired"}}
                         .dump()};
        };
    }
    sky::PoolSpec spec() const override {
        return base_spec(sky::Verda{.endpoint = fake->endpoint()}, "H100");
    }
};

struct DigitalOceanCloud : HttpCloud<sky::test::FakeDigitalOcean> {
    explicit DigitalOceanCloud(TestHosts& hosts) : HttpCloud(hosts) {
        secret = "dop_v1_faultmatrix_token_9e8d7c";
        env.set("DIGITALOCEAN_TOKEN", secret);
        sky::test::FakeDigitalOceanOptions o;
        o.token = secret;
        o.hosts = &binding;
        fake = std::make_unique<sky::test::FakeDigitalOcean>(o);
        faults.method = "POST";
        faults.path = "/v2/droplets";
        faults.capacity = [](const HttpRequest&) {
            return HttpReply{
                422, json{{"id", "unprocessable_entity"},
                          {"message",
                           "The requested size is not available in this region at this time: "
                           "there is not enough capacity. Please try another size or region."}}
                         .dump()};
        };
        faults.expired_auth = [](const HttpRequest&) {
            return HttpReply{
                401,
                json{{"id", "Unauthorized"}, {"message", "Unable to authenticate you"}}.dump()};
        };
    }
    sky::PoolSpec spec() const override {
        return base_spec(sky::DigitalOcean{.endpoint = fake->endpoint()}, "H100");
    }
};

// --- the matrix ---------------------------------------------------------------------------------

std::vector<FaultKind> kinds_to_run() {
    const char* only = std::getenv("SKY_FAULT_KINDS");
    if (!only || !*only) return sky::test::all_fault_kinds();
    std::vector<FaultKind> out;
    for (auto k : sky::test::all_fault_kinds())
        if (std::string(only).find(sky::test::fault_kind_name(k)) != std::string::npos)
            out.push_back(k);
    return out;
}

std::string lower(std::string s) {
    for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

// Whether an error's text says the credentials were refused.
bool names_auth(const std::string& what) {
    const std::string w = lower(what);
    for (const char* word : {"401", "403", "authfailure", "requestexpired", "unauthorized",
                             "authenticat", "expired", "credential"})
        if (w.find(word) != std::string::npos) return true;
    return false;
}

// One cell: a pool under `kind` at 30%; what happened, checked. The cell's seed is `base` (the
// run's, SKY_FAULT_SEED) plus the kind's number.
void run_cell(Cloud& cloud, const std::string& cloud_name, FaultKind kind, std::uint64_t base) {
    const std::string kind_name(sky::test::fault_kind_name(kind));
    const std::uint64_t used = cloud.add_rate(kind, base + static_cast<std::uint64_t>(kind), kRate);
    INFO(cloud_name << " x " << kind_name << " at 30%, seed " << used << " (replay: SKY_FAULT_SEED="
                    << base << " SKY_FAULT_KINDS=" << kind_name << ")");
    Recorder rec;
    auto spec = cloud.spec();
    spec.on_event = rec.callback();
    std::string outcome;
    std::string message;
    const auto t0 = Clock::now();
    try {
        sky::ComputePool pool{spec};
        auto nodes = sky::compute<node_index>() | pool;
        std::sort(nodes.begin(), nodes.end());
        CHECK(nodes == std::vector<int>{0, 1});
        std::vector<sky::PendingCompute<int>> calls;
        for (int i = 0; i < 4; ++i) calls.push_back(sky::compute<square>(i));
        CHECK((sky::gather(std::move(calls)) >> pool) == std::vector<int>{0, 1, 4, 9});
        outcome = "ok";
    } catch (const sky::ProvisionError& e) {
        outcome = "ProvisionError";
        message = e.what();
    } catch (const sky::Error& e) {
        outcome = std::string("untyped sky::Error");
        message = e.what();
    } catch (const std::exception& e) {
        outcome = std::string("std::exception");
        message = e.what();
    }
    const auto took = Clock::now() - t0;
    cloud.clear_rates();
    const double seconds = std::chrono::duration<double>(took).count();
    std::fprintf(stderr, "fault matrix: %s x %s: %s in %.1f s (faults injected: %d)%s%s\n",
                 cloud_name.c_str(), kind_name.c_str(), outcome.c_str(), seconds, cloud.hits(kind),
                 message.empty() ? "" : ": ", message.substr(0, 400).c_str());
    INFO("outcome " << outcome << " after " << seconds << " s: " << message);
    // Correct results or the typed error of a cloud that failed: never another error, never a
    // hang past the bound.
    CHECK((outcome == "ok" || outcome == "ProvisionError"));
    CHECK(took < bound_for(kind));
    if (kind == FaultKind::expired_auth && outcome != "ok") CHECK(names_auth(message));
    for (const auto& s : cloud.secrets()) {
        CHECK(message.find(s) == std::string::npos);
        std::lock_guard lk(rec.m);
        for (const auto& l : rec.lines) CHECK(l.find(s) == std::string::npos);
    }
    // Nothing is left at the cloud once the pool is gone (terminations are confirmed before the
    // destructor returns; a short grace for a fake's own state change).
    const bool none_left = sky::test::wait_until([&] { return cloud.live() == 0; }, 5s);
    INFO("live instances: " << cloud.live());
    CHECK(none_left);
}

template <class C>
void run_matrix(const std::string& cloud_name) {
    TestHosts hosts(2);
    ScopedEnv env;
    env.set("SKY_HTTP_ATTEMPT_TIMEOUT_MS", kAttemptTimeoutMs);
    const std::uint64_t base = sky::test::fault_seed_from_env();
    for (auto kind : kinds_to_run()) {
        // A fresh fake per cell (a marketplace's rented asks stay taken), the same hosts (what
        // a pool shipped to them is cached there); one pool after another, no sections: Catch
        // would rerun the case, hosts and all, once per section.
        C cloud(hosts);
        run_cell(cloud, cloud_name, kind, base);
    }
    CHECK(sky::test::wait_until([] { return sky::test::remote_workers() == 0; }, 10s));
}

}  // namespace faults

using namespace faults;

TEST_CASE("fault matrix: aws (fake EC2) under every API fault at 30%", "[faults][cloud]") {
    SKIP_WITHOUT_HOSTS();
    run_matrix<Ec2Cloud>("aws");
}

TEST_CASE("fault matrix: runpod under every API fault at 30%", "[faults][cloud]") {
    SKIP_WITHOUT_HOSTS();
    run_matrix<RunPodCloud>("runpod");
}

TEST_CASE("fault matrix: vastai under every API fault at 30%", "[faults][cloud]") {
    SKIP_WITHOUT_HOSTS();
    run_matrix<VastCloud>("vastai");
}

TEST_CASE("fault matrix: verda under every API fault at 30%", "[faults][cloud]") {
    SKIP_WITHOUT_HOSTS();
    run_matrix<VerdaCloud>("verda");
}

TEST_CASE("fault matrix: digitalocean under every API fault at 30%", "[faults][cloud]") {
    SKIP_WITHOUT_HOSTS();
    run_matrix<DigitalOceanCloud>("digitalocean");
}

// Credentials the cloud refuses from the first request on (expired, revoked): the pool's start
// fails with a ProvisionError that names them, in seconds (nothing was launched, so nothing can
// hold what teardown deletes: no minutes of waiting for it), no secret in any message, and
// nothing is left at the cloud.
template <class C>
void refused_from_the_start(const std::string& cloud_name) {
    TestHosts hosts(1);
    ScopedEnv env;
    env.set("SKY_HTTP_ATTEMPT_TIMEOUT_MS", kAttemptTimeoutMs);
    C cloud(hosts);
    cloud.add_rate(FaultKind::expired_auth, sky::test::fault_seed_from_env(), 1.0);
    Recorder rec;
    auto spec = cloud.spec();
    spec.nodes = 1;
    spec.on_event = rec.callback();
    std::string outcome = "started";
    std::string message;
    const auto t0 = Clock::now();
    try {
        sky::ComputePool pool{spec};
    } catch (const sky::ProvisionError& e) {
        outcome = "ProvisionError";
        message = e.what();
    } catch (const std::exception& e) {
        outcome = "other";
        message = e.what();
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    std::fprintf(stderr, "refused credentials: %s: %s in %.1f s: %s\n", cloud_name.c_str(),
                 outcome.c_str(), seconds, message.substr(0, 300).c_str());
    INFO(cloud_name << ": " << outcome << " after " << seconds << " s: " << message);
    CHECK(outcome == "ProvisionError");
    CHECK(names_auth(message));
    CHECK(seconds < 30);
    for (const auto& s : cloud.secrets()) {
        CHECK(message.find(s) == std::string::npos);
        std::lock_guard lk(rec.m);
        for (const auto& l : rec.lines) CHECK(l.find(s) == std::string::npos);
    }
    CHECK(cloud.live() == 0);
}

TEST_CASE("refused credentials: every cloud fails the pool's start in seconds and names them",
          "[faults][cloud]") {
    SKIP_WITHOUT_HOSTS();
    refused_from_the_start<Ec2Cloud>("aws");
    refused_from_the_start<RunPodCloud>("runpod");
    refused_from_the_start<VastCloud>("vastai");
    refused_from_the_start<VerdaCloud>("verda");
    refused_from_the_start<DigitalOceanCloud>("digitalocean");
}
