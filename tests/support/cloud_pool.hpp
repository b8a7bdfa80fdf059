#pragma once
/// \file What the REST clouds' end-to-end tests share (tests/e2e/{runpod,vastai,verda,
/// digitalocean}): a cloud's fake whose machines are SSH test hosts, with the cloud's credentials
/// in the environment and the pool's events recorded, and the steps every such test takes: a
/// 2-node pool's broadcast and gather, its instances on the hosts, nothing alive after it, a
/// ProvisionError listing each attempt, a node taken back mid-gather and replaced. Each
/// provider's test keeps what is its cloud's own: the fake's options, the pool's provider and
/// accelerator, how capacity is taken away or a machine taken back, what the fake must have seen.
#include <catch2/catch.hpp>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "fakes/common/host_binding.hpp"
#include "hosts/test_hosts.hpp"
#include "sky/sky.hpp"
#include "support/scoped_env.hpp"

namespace sky::test {

/// A pool's events, each as sky::describe words it, counted by type, checked for a secret.
class EventRecorder {
public:
    /// `secret`: the credential no event may show.
    explicit EventRecorder(std::string secret) : secret_(std::move(secret)) {}
    [[nodiscard]] sky::Callback callback();
    template <class T>
    int count() {
        std::lock_guard lk(m_);
        int n = 0;
        for (const auto& e : events_) n += std::holds_alternative<T>(e) ? 1 : 0;
        return n;
    }
    /// CHECKs that no event shows the secret or a private key.
    void check_no_secrets();

private:
    std::string secret_;
    std::mutex m_;
    std::vector<std::string> lines_;
    std::vector<sky::Event> events_;
};

/// What every instance of a 2-node pool on a cloud's fake must be.
struct ExpectedInstance {
    std::string provider;       ///< "runpod"
    std::string instance_type;  ///< "1x_RTX4090_SECURE"
    bool spot = false;
};

/// What the pools run (registered in every program that links this; named, as a worker finds
/// them by name).
namespace pool_functions {
int node_index();             ///< instance_info().node
int square(int x);            ///< x * x
int slow_node_index(int ms);  ///< node_index() after `ms` milliseconds
}  // namespace pool_functions

/// The broadcast (one call per node: nodes 0 and 1) and a gather of 6 squares, CHECKed.
void check_broadcast_and_gather(sky::ComputePool& pool);

/// CHECKs a pool's instances: one per host, each `want`, at the host's address; `also` checks what
/// else the cloud's test expects of each.
void check_pool_instances(const sky::ComputePool& pool, const TestHosts& hosts,
                          const ExpectedInstance& want,
                          const std::function<void(const sky::Instance&)>& also);

/// CHECKs that no worker is left on the hosts (waiting up to 10 s for them to end).
void check_no_remote_workers();

/// Starting a pool of `spec` must fail with a ProvisionError: REQUIREs at least `min_attempts`
/// attempts and CHECKs each is at `provider` and named in the message; returns them for the
/// cloud's own checks of its answers.
std::vector<sky::ProvisionAttempt> provision_attempts(const sky::PoolSpec& spec,
                                                      std::size_t min_attempts,
                                                      std::string_view provider);

/// Runs 8 calls of 1.5 s with .retries(1) on a 2-node pool, has the cloud take node 1's machine
/// back 0.7 s in (`take_back(id)`), and CHECKs that every call completes, node 1 runs on a new
/// machine and a broadcast reaches both nodes again.
void check_replacement(sky::ComputePool& pool,
                       const std::function<void(const std::string&)>& take_back);

/// A cloud's fake (FakeRunPod, FakeVast, ...) whose machines are `n` test hosts, with the cloud's
/// credentials in the environment while it lives and the events of its pools recorded.
template <class Fake>
struct CloudOnHosts {
    /// `options`: the fake's (its credentials); its machines are bound to the hosts here.
    template <class Options>
    CloudOnHosts(int n, std::vector<std::pair<std::string, std::string>> credentials,
                 std::string secret, Options options)
        : env(std::move(credentials)),
          hosts(n),
          binding(hosts),
          fake(on_hosts(std::move(options), binding)),
          events(std::move(secret)) {}

    /// A quiet pool of `nodes` on `provider` (the fake's endpoint) whose events are recorded.
    sky::PoolSpec pool_spec(sky::Provider provider, int nodes, std::string accelerator,
                            sky::Spot spot = sky::PoolSpec{}.spot) {
        sky::PoolSpec spec;
        spec.provider = std::move(provider);
        spec.nodes = nodes;
        spec.accelerator = std::move(accelerator);
        spec.spot = std::move(spot);
        spec.display = sky::Display::quiet;
        spec.on_event = events.callback();
        return spec;
    }

    /// check_pool_instances on these hosts.
    void check_instances(const sky::ComputePool& pool, const ExpectedInstance& want,
                         const std::function<void(const sky::Instance&)>& also = {}) {
        check_pool_instances(pool, hosts, want, also);
    }

    /// After the pool: no machine alive at the fake, none bound to a host, no worker left on
    /// one, no secret in an event.
    void check_nothing_left() {
        CHECK(fake.alive() == 0);
        CHECK(binding.machines().empty());
        check_no_remote_workers();
        events.check_no_secrets();
    }

    /// After a pool whose node was taken back: it was reported preempted and replaced, nothing
    /// is alive at the fake (the machine taken back was ended too), no secret in an event.
    void check_replaced_and_ended() {
        CHECK(events.template count<sky::InstancePreempted>() >= 1);
        CHECK(events.template count<sky::InstanceReplaced>() >= 1);
        CHECK(fake.alive() == 0);
        events.check_no_secrets();
    }

    ScopedEnv env;
    TestHosts hosts;
    HostBinding binding;
    Fake fake;
    EventRecorder events;

private:
    template <class Options>
    static Options on_hosts(Options options, HostBinding& binding) {
        options.hosts = &binding;
        return options;
    }
};

}  // namespace sky::test
