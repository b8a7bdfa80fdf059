// sky::Kubernetes against the judge (tests/fakes/kubernetes): what a real 1.20 test cluster
// cannot easily show, answered as kube-apiserver answers (Status objects with its words): an
// expired token, a user without pods/exec, a full ResourceQuota, throttling with Retry-After,
// a kubelet that never confirms a deletion, a v5-only server and a dropped WebSocket. Each case
// checks what the user sees (the error and its words, the events), what crossed the wire (the
// requests the judge logged) and that nothing is left in the judge's namespace.
#include <catch2/catch.hpp>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>

#include "fakes/kubernetes/fake_kube_api.hpp"
#include "providers/kubernetes/api.hpp"
#include "providers/kubernetes/channel.hpp"
#include "providers/kubernetes/streaming.hpp"
#include "sky/sky.hpp"
#include "support/temp_home.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using sky::test::FakeKubeApi;

namespace {

sky::PoolSpec spec_of(const FakeKubeApi& judge, int nodes) {
    sky::PoolSpec s;
    s.provider = sky::Kubernetes{.kubeconfig = judge.kubeconfig().string(),
                                 .image = "judge/base:1",
                                 .queue_timeout = std::chrono::seconds(20)};
    s.nodes = nodes;
    s.display = sky::Display::quiet;
    s.collect_metrics = false;
    return s;
}

std::shared_ptr<sky::detail::kubernetes::KubeApi> api_of(const FakeKubeApi& judge) {
    sky::detail::kubernetes::KubeconfigRequest r;
    r.kubeconfig = judge.kubeconfig().string();
    return sky::detail::kubernetes::connect_api(r);
}

}  // namespace

TEST_CASE("kubernetes judge: a 401 re-reads the token file once and goes on with the rotated token",
          "[kubernetes][judge]") {
    FakeKubeApi judge;
    auto api = api_of(judge);
    CHECK(api->call("GET", api->core("pods")).value("kind", "") == "PodList");
    // The token rotates: the server takes only the new one, the file holds it, the client has
    // the old one cached.
    judge.write_token("token-2");
    judge.accept_tokens({"token-2"});
    CHECK(api->call("GET", api->core("pods")).value("kind", "") == "PodList");
    CHECK(judge.count("GET", "/api/v1/namespaces/sky-test/pods", "token-1") == 2);
    CHECK(judge.count("GET", "/api/v1/namespaces/sky-test/pods", "token-2") == 1);
}

TEST_CASE(
    "kubernetes judge: an expired token is re-read once, then the pool fails with a "
    "ProvisionError saying so, naming the user and never the token, and creates nothing",
    "[kubernetes][judge]") {
    sky::test::TempSkyHome home;
    FakeKubeApi judge;
    judge.write_token("expired-token-value");
    judge.accept_tokens({"token-2"});
    std::string what;
    try {
        sky::ComputePool pool{spec_of(judge, 1)};
        FAIL("the pool started with an expired token");
    } catch (const sky::ProvisionError& e) {
        what = e.what();
    }
    INFO(what);
    CHECK(what.find("401") != std::string::npos);
    CHECK(what.find("Unauthorized") != std::string::npos);
    CHECK(what.find("user \"sky-user\"") != std::string::npos);
    CHECK(what.find("re-reading its token file " + judge.token_file().string()) !=
          std::string::npos);
    CHECK(what.find("expired-token-value") == std::string::npos);
    // Exactly one retry with a re-read credential, then no more.
    CHECK(judge.count("POST", "/api/v1/namespaces/sky-test/configmaps", "expired-token-value") ==
          2);
    CHECK(judge.configmaps() == 0);
    CHECK(judge.pods().empty());
}

TEST_CASE(
    "kubernetes judge: a 403 on pods/exec is a BootstrapError in phase check naming pods/exec "
    "and quoting the API, and teardown leaves no pod and no ConfigMap",
    "[kubernetes][judge]") {
    sky::test::TempSkyHome home;
    FakeKubeApi judge;
    judge.allow_exec(false);
    std::string what;
    try {
        sky::ComputePool pool{spec_of(judge, 2)};
        FAIL("the pool started without pods/exec");
    } catch (const sky::BootstrapError& e) {
        what = e.what();
        CHECK(e.phase() == "check");
    }
    INFO(what);
    CHECK(what.find("pods/exec") != std::string::npos);
    CHECK(what.find("cannot get resource \"pods/exec\" in API group \"\" in the namespace "
                    "\"sky-test\"") != std::string::npos);
    CHECK(judge.count("GET", "/api/v1/namespaces/sky-test/pods/") >= 1);
    CHECK(judge.configmaps() == 0);
    CHECK(judge.pods().empty());
}

TEST_CASE(
    "kubernetes judge: a full ResourceQuota is a ProvisionError quoting the quota's message, "
    "and the pods made before it are deleted",
    "[kubernetes][judge]") {
    sky::test::TempSkyHome home;
    FakeKubeApi judge;
    judge.pod_quota(1);
    std::string what;
    try {
        sky::ComputePool pool{spec_of(judge, 2)};
        FAIL("the pool started beyond its quota");
    } catch (const sky::ProvisionError& e) {
        what = e.what();
    }
    INFO(what);
    CHECK(what.find("403") != std::string::npos);
    CHECK(what.find("exceeded quota: sky-quota, requested: pods=1, used: pods=1, limited: "
                    "pods=1") != std::string::npos);
    CHECK(judge.count("POST", "/api/v1/namespaces/sky-test/pods") == 2);
    CHECK(judge.configmaps() == 0);
    CHECK(judge.pods().empty());
}

TEST_CASE(
    "kubernetes judge: 429 with Retry-After is retried after the time it names, and a server "
    "that keeps throttling ends in an ApiError quoting it within bounded time",
    "[kubernetes][judge]") {
    FakeKubeApi judge;
    auto api = api_of(judge);
    const std::string pods = "/api/v1/namespaces/sky-test/pods";
    judge.throttle("GET", pods, 2, 1);
    auto start = Clock::now();
    CHECK(api->call("GET", api->core("pods")).value("kind", "") == "PodList");
    auto took = Clock::now() - start;
    CHECK(took >= 1900ms);  // 1 s after each of the two 429s
    CHECK(took < 10s);
    CHECK(judge.count("GET", pods) == 3);

    judge.throttle("GET", pods, 100, 1);
    start = Clock::now();
    try {
        (void)api->call("GET", api->core("pods"));
        FAIL("a server that throttles for ever answered");
    } catch (const sky::detail::kubernetes::ApiError& e) {
        CHECK(e.status() == 429);
        CHECK(e.reason() == "TooManyRequests");
        CHECK(e.message() == "Too many requests, please try again later.");
    }
    took = Clock::now() - start;
    CHECK(took < 15s);
    CHECK(judge.count("GET", pods) == 3 + 4);  // the HTTP client's 4 attempts
}

TEST_CASE("kubernetes judge: a 429 on the pod's create is retried and the pool goes on to exec",
          "[kubernetes][judge]") {
    sky::test::TempSkyHome home;
    FakeKubeApi judge;
    judge.throttle("POST", "/api/v1/namespaces/sky-test/pods", 1, 1);
    judge.allow_exec(false);  // the end of this judge's pods: proof that the pool got there
    CHECK_THROWS_AS(sky::ComputePool(spec_of(judge, 1)), sky::BootstrapError);
    CHECK(judge.count("POST", "/api/v1/namespaces/sky-test/pods") == 2);
    CHECK(judge.pods().empty());
    CHECK(judge.configmaps() == 0);
}

TEST_CASE(
    "kubernetes judge: pods whose kubelet never confirms their deletion are force-deleted at "
    "teardown with an ErrorEvent, in bounded time",
    "[kubernetes][judge]") {
    sky::test::TempSkyHome home;
    FakeKubeApi judge;
    judge.kubelet_confirms(false);
    judge.allow_exec(false);  // the pool fails at its first exec and tears down
    std::mutex m;
    std::vector<std::string> errors;
    auto spec = spec_of(judge, 2);
    spec.on_event = [&](const sky::Event& e) -> std::optional<sky::Event> {
        if (const auto* x = std::get_if<sky::ErrorEvent>(&e)) {
            std::lock_guard lk(m);
            errors.push_back(x->message);
        }
        return std::nullopt;
    };
    const auto start = Clock::now();
    CHECK_THROWS_AS(sky::ComputePool(spec), sky::BootstrapError);
    const auto took = Clock::now() - start;
    CHECK(took < 120s);
    {
        std::lock_guard lk(m);
        bool forced = false;
        for (const auto& x : errors) {
            INFO(x);
            forced = forced || (x.find("force-deleted") != std::string::npos &&
                                x.find("does not confirm") != std::string::npos);
        }
        CHECK(forced);
    }
    // The deletion with grace period 0 came, after the ones with a grace period.
    bool zero = false;
    for (const auto& r : judge.requests())
        zero = zero ||
               (r.method == "DELETE" && r.path.rfind("/api/v1/namespaces/sky-test/pods/", 0) == 0);
    CHECK(zero);
    CHECK(judge.pods().empty());
    CHECK(judge.configmaps() == 0);
}

TEST_CASE(
    "kubernetes judge: a v5-only server gets v5 from sky's exec: stdin closed by v5's close, "
    "the exit code from the status channel",
    "[kubernetes][judge]") {
    namespace k8s = sky::detail::kubernetes;
    FakeKubeApi judge;
    judge.exec_protocols({k8s::kChannelV5});
    // A pod to exec in (the judge runs the command on this machine).
    auto api = api_of(judge);
    api->call("POST", api->core("pods"),
              nlohmann::json::parse(R"({"apiVersion": "v1", "kind": "Pod",
                  "metadata": {"name": "p"}, "spec": {"containers": [{"name": "sky"}]}})"));
    k8s::KubeconfigRequest r;
    r.kubeconfig = judge.kubeconfig().string();
    k8s::CredentialSource creds(k8s::load_kubeconfig(r));
    k8s::ExecRequest e;
    e.ns = FakeKubeApi::ns();
    e.pod = "p";
    // cat ends only when its input is closed: with v4 (no close) this would wait for ever.
    e.argv = {"sh", "-c", "cat; echo done; echo oops >&2; exit 3"};
    e.stdin_data = "abc\n";
    e.timeout = std::chrono::seconds(20);
    const auto start = Clock::now();
    const k8s::ExecResult x = k8s::exec(creds, e);
    CHECK(Clock::now() - start < 10s);
    CHECK(x.protocol == k8s::kChannelV5);
    CHECK(x.exited);
    CHECK(x.exit_code == 3);
    CHECK(x.out == "abc\ndone\n");
    CHECK(x.err == "oops\n");
    e.argv = {"true"};
    e.stdin_data.reset();
    CHECK(k8s::exec(creds, e).exit_code == 0);

    // A server that speaks neither of sky's subprotocols refuses the upgrade, quoted.
    judge.exec_protocols({"v3.channel.k8s.io"});
    try {
        (void)k8s::exec(creds, e);
        FAIL("an upgrade in no common subprotocol succeeded");
    } catch (const k8s::StreamRefused& refused) {
        CHECK(refused.status() == 403);
        CHECK_THAT(refused.message(), Catch::Contains("v5.channel.k8s.io"));
    }
}

TEST_CASE(
    "kubernetes judge: an exec whose WebSocket is dropped mid-stream fails at once with an "
    "error naming the pod, not a hang",
    "[kubernetes][judge]") {
    namespace k8s = sky::detail::kubernetes;
    FakeKubeApi judge;
    judge.drop_exec_streams(true);
    auto api = api_of(judge);
    api->call("POST", api->core("pods"),
              nlohmann::json::parse(R"({"apiVersion": "v1", "kind": "Pod",
                  "metadata": {"name": "p"}, "spec": {"containers": [{"name": "sky"}]}})"));
    k8s::KubeconfigRequest r;
    r.kubeconfig = judge.kubeconfig().string();
    k8s::CredentialSource creds(k8s::load_kubeconfig(r));
    k8s::ExecRequest e;
    e.ns = FakeKubeApi::ns();
    e.pod = "p";
    e.argv = {"echo", "hello"};
    e.timeout = std::chrono::seconds(60);
    const auto start = Clock::now();
    std::string what;
    try {
        (void)k8s::exec(creds, e);
        FAIL("a dropped stream gave a result");
    } catch (const sky::Error& x) {
        what = x.what();
    }
    INFO(what);
    CHECK(Clock::now() - start < 10s);
    CHECK(what.find("pod sky-test/p") != std::string::npos);
    CHECK((what.find("broke") != std::string::npos ||
           what.find("without the process's status") != std::string::npos));
}
