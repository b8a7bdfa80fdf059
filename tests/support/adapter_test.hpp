#pragma once
/// \file What the REST clouds' adapter unit tests share
/// (tests/unit/providers/{runpod,vastai,verda,digitalocean}): events ignored, a launch request as
/// the cloud layer makes one, an offer found by its type, the ways an answer is lost. Header-only:
/// a unit test links nothing more for it.
#include <catch2/catch.hpp>
#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "fakes/common/fault_rate.hpp"
#include "fakes/common/http_fake.hpp"
#include "sky/cloud.hpp"
#include "sky/events.hpp"
#include "sky/sky.hpp"
#include "support/scoped_env.hpp"

namespace sky::test {

/// A `notify` that drops every event.
inline std::function<void(sky::Event)> ignore_events() {
    return [](sky::Event) {};
}

/// A launch of `offer` for node `node` of pool 0123456789abcdef, with a client key and a boot
/// script that carries a (fake) pinned host key.
inline sky::LaunchRequest launch_request(const sky::Offer& offer, bool spot = false, int node = 0) {
    sky::LaunchRequest r;
    r.pool_id = "0123456789abcdef";
    r.name = "sky-0123456789abcdef";
    r.node = node;
    r.offer = offer;
    r.spot = spot;
    r.ssh_public_key =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeFakeFakeFakeFakeFakeFakeFakeFake sky";
    r.boot_script = "#!/bin/bash\ncat > /etc/ssh/k <<'SKY_HOST_KEY'\nkey\nSKY_HOST_KEY\n";
    return r;
}

/// Every event a pool's cloud layer emits, kept for the test to read (thread-safe).
class EventLog {
public:
    /// A `notify` / `emit` that appends to this log.
    std::function<void(sky::Event)> sink() {
        return [this](sky::Event e) {
            std::lock_guard lk(m_);
            events_.push_back(std::move(e));
        };
    }
    /// The events of type E, in order.
    template <class E>
    std::vector<E> all() const {
        std::lock_guard lk(m_);
        std::vector<E> out;
        for (const auto& e : events_)
            if (const E* x = std::get_if<E>(&e)) out.push_back(*x);
        return out;
    }
    /// The instance types the pool asked the cloud for (InstanceLaunching), in order.
    std::vector<std::string> tried() const {
        std::vector<std::string> out;
        for (const auto& l : all<sky::InstanceLaunching>()) out.push_back(l.instance_type);
        return out;
    }

private:
    mutable std::mutex m_;
    std::vector<sky::Event> events_;
};

/// The offer of this instance type; FAILs the test when there is none.
inline sky::Offer offer_of(const std::vector<sky::Offer>& offers, const std::string& type) {
    for (const auto& o : offers)
        if (o.instance_type == type) return o;
    FAIL("no offer " << type);
    return {};
}

/// Runs `body(kind)` for each way an answer is lost after the cloud carried the request out (it
/// never comes, it is cut short, it is not the API's format), with every HTTP attempt capped at
/// 500 ms: a stalled answer costs that, not the default minute.
template <class Body>
void for_each_lost_answer(Body&& body) {
    ScopedEnv fast(
        std::vector<std::pair<std::string, std::string>>{{"SKY_HTTP_ATTEMPT_TIMEOUT_MS", "500"}});
    for (FaultKind lost : {FaultKind::stall, FaultKind::truncated, FaultKind::malformed}) {
        INFO("the answers are " << fault_kind_name(lost));
        body(lost);
    }
}

namespace conformance {

/// A conformance fixture's fake lists the pool's cheapest type, then refuses it at launch as
/// unknown (a type retired after the listing was read); see support/adapter_conformance.hpp.
struct Retired {};

/// What a conformance fixture's cloud is: its provider's name, the pool's two types (cheapest
/// first, as InstanceLaunching names them), and whether its listing says what can be had now
/// (then nothing is launched when nothing is available).
struct CloudFacts {
    const char* provider;
    const char* first_type;
    const char* second_type;
    bool lists_availability;
};

/// A pool of `nodes` on-demand machines with `accelerator` on `provider`.
inline sky::PoolSpec on_demand_pool(sky::Provider provider, int nodes, const char* accelerator) {
    sky::PoolSpec s;
    s.provider = std::move(provider);
    s.nodes = nodes;
    s.accelerator = accelerator;
    s.spot = sky::Spot::Never{};
    return s;
}

/// Every request `method path` (and `when`, if set) gets a fault of this kind.
inline HttpFaultRate every(const char* method, const char* path, FaultKind kind,
                           std::function<bool(const HttpRequest&)> when = {}) {
    return {.method = method,
            .path = path,
            .when = std::move(when),
            .kinds = {kind},
            .probability = 1.0};
}

}  // namespace conformance

}  // namespace sky::test
