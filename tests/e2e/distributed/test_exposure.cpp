// What a distributed call exposes: the frameworks' rendezvous services authenticate nobody, and
// where sky cannot close the pool's network (Local, Simulated, sky::SSH, Slurm, RunPod and
// Vast.ai containers, a custom cloud) the pool says so once, at its first distributed call,
// naming what can reach them; where it can (AWS, DigitalOcean, Verda) it says nothing. Each
// provider states its exposure in its descriptor.
#include <catch2/catch.hpp>
#include <mutex>

#include "providers/registry/registry.hpp"
#include "sky/sky.hpp"

namespace exposure_test {
int rank_of() { return sky::instance_info().node; }
}  // namespace exposure_test

TEST_CASE("distributed exposure: said for the providers sky cannot close, not for the others",
          "[distributed][security]") {
    auto on = [](sky::Provider p) {
        const auto e =
            sky::detail::descriptor_for(p).facts.exposure.value(sky::PoolSpec{.provider = p});
        return e.open() ? e.text() : std::string();
    };
    CHECK(on(sky::Local{}).find("every other user of this machine") != std::string::npos);
    const auto ssh = on(sky::SSH{.hosts = {"gpu1.lab", "gpu2.lab"}});
    CHECK(ssh.find("gpu1.lab, gpu2.lab") != std::string::npos);
    CHECK(ssh.find("every other user of those hosts") != std::string::npos);
    CHECK(on(sky::RunPod{}).find("containers") != std::string::npos);
    CHECK(on(sky::VastAI{}).find("Vast.ai") != std::string::npos);
    CHECK(on(sky::Slurm{}).find("cluster's network") != std::string::npos);
    for (const auto& text : {on(sky::Local{}), ssh, on(sky::RunPod{}), on(sky::Slurm{})})
        CHECK(text.find("authenticate nobody") != std::string::npos);
    CHECK(on(sky::AWS{}).empty());
    CHECK(on(sky::DigitalOcean{}).empty());
    CHECK(on(sky::Verda{}).empty());
}

TEST_CASE("distributed exposure: a Local pool says it once, at its first distributed call",
          "[distributed][security]") {
    std::mutex m;
    std::vector<std::string> notices;
    sky::PoolSpec spec{.provider = sky::Local{}, .nodes = 2, .display = sky::Display::quiet};
    spec.on_event = [&](const sky::Event& e) -> std::optional<sky::Event> {
        if (const auto* x = std::get_if<sky::ErrorEvent>(&e);
            x && x->message.find("rendezvous") != std::string::npos) {
            std::lock_guard lk(m);
            notices.push_back(x->message);
        }
        return std::nullopt;
    };
    {
        sky::ComputePool pool{spec};
        (void)(sky::compute<exposure_test::rank_of>() | pool);  // not distributed: nothing to say
        {
            std::lock_guard lk(m);
            CHECK(notices.empty());
        }
        for (int i = 0; i < 2; ++i)
            (void)(sky::compute<exposure_test::rank_of>().with(sky::distributed::torch{}) | pool);
        (void)(sky::compute<exposure_test::rank_of>().with(sky::distributed::jax{}) | pool);
    }
    // Events reach the handler on the pool's event thread, maybe after the calls' results; the
    // pool delivers every one before its destructor returns.
    std::lock_guard lk(m);
    REQUIRE(notices.size() == 1);
    CHECK(notices[0].find("127.0.0.1") != std::string::npos);
}
