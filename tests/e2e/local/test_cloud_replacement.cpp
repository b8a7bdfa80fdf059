// Issue 25 item 6: a lost node's replacement is tried again, up to its documented bound of three
// attempts, also when an attempt fails in its connect phase. The cloud is a user-defined one
// (sky::CloudAdapter: the in-memory tests/fakes/cloud), its machines started as local worker
// processes (the cloud layer's NodeStarter, as sky::Simulated does), so that no root or SSH is
// needed; a start the test chooses fails as an unreachable SSH host does.
#include <signal.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>

#include "e2e/local/functions.hpp"
#include "fakes/cloud/fake_cloud.hpp"
#include "pool/pool_core.hpp"
#include "providers/cloud/cloud_backend.hpp"
#include "providers/local/local_worker.hpp"
#include "ssh/session.hpp"

using namespace e2e;
using namespace std::chrono_literals;
namespace d = sky::detail;

namespace {

struct Replacement {
    std::shared_ptr<sky::test::FakeCloudState> cloud =
        std::make_shared<sky::test::FakeCloudState>();
    std::atomic<int> starts{0};
    std::set<int> failing;  ///< which starts (0: the first machine's) fail to connect
    std::mutex m;
    std::vector<sky::Event> events;

    std::shared_ptr<d::PoolCore> pool() {
        sky::PoolSpec spec = quiet(1);
        spec.provider = sky::test::FakeCloud{cloud};
        spec.spot = sky::Spot::Never{};
        spec.collect_metrics = false;
        spec.on_event = [this](const sky::Event& e) -> std::optional<sky::Event> {
            std::lock_guard lk(m);
            events.push_back(e);
            return std::nullopt;
        };
        d::NodeStarter starter =
            [this](const d::NodeStartRequest& r,
                   const std::function<void(sky::Event)>&) -> std::unique_ptr<d::NodeHandle> {
            if (failing.count(starts++))
                throw d::ssh::ConnectError(
                    "connect to " + r.machine.id + ":22 failed: Connection refused", false);
            return std::make_unique<d::LocalWorker>(*r.spec, "");
        };
        auto backend = d::make_cloud_backend(std::make_unique<sky::test::FakeCloud>(cloud),
                                             {spec, "replace-test", nullptr}, std::move(starter));
        auto core = std::make_shared<d::PoolCore>(spec, std::move(backend));
        core->start();
        return core;
    }
    template <class E>
    std::vector<E> all() {
        std::lock_guard lk(m);
        std::vector<E> v;
        for (auto& e : events)
            if (auto* x = std::get_if<E>(&e)) v.push_back(*x);
        return v;
    }
};

template <class R>
R run(d::PoolCore& core, const sky::PendingCompute<R>& p) {
    auto st = core.submit({&p.desc()}, false);
    REQUIRE(st->wait_for(60s));
    return d::take<R>(st->outcomes[0]);
}

/// Takes node 0's machine away (the cloud says it is gone) and kills its worker.
void lose_machine(Replacement& r, d::PoolCore& core) {
    const long worker = run(core, sky::compute<pid>());
    r.cloud->preempt(core.instances().at(0).id);
    REQUIRE(::kill(static_cast<pid_t>(worker), SIGKILL) == 0);
}

}  // namespace

TEST_CASE("a replacement that fails to connect is tried again, and the second one serves",
          "[local][replacement]") {
    Replacement r;
    r.failing = {1};  // the first replacement's machine refuses the connection
    auto core = r.pool();
    const std::string first = core->instances().at(0).id;
    lose_machine(r, *core);
    // A call that may be re-run waits for the node's replacement and runs there.
    CHECK(run(*core, sky::compute<add>(2, 3).retries(2)) == 5);
    CHECK(r.starts == 3);
    auto refused = [&] {
        int n = 0;
        for (auto& e : r.all<sky::ErrorEvent>())
            if (e.message.find("replacement failed (attempt 1 of 3)") != std::string::npos &&
                e.message.find("Connection refused") != std::string::npos &&
                e.message.find("trying again") != std::string::npos)
                ++n;
        return n;
    };
    // Events reach the handler on the pool's event thread, maybe after the call's result.
    for (int i = 0; i < 200 && (refused() < 1 || r.all<sky::InstanceReplaced>().empty()); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    CHECK(refused() == 1);
    const auto replaced = r.all<sky::InstanceReplaced>();
    REQUIRE(replaced.size() == 1);
    CHECK(replaced[0].old_instance_id == first);
    CHECK(core->instances().at(0).id != first);
    CHECK(core->instance_count() == 1);
    core->close(false);
    CHECK(r.cloud->live() == 0);
    CHECK(live_children() == 0);
}

TEST_CASE("a node whose every replacement fails is lost after three attempts",
          "[local][replacement]") {
    Replacement r;
    r.failing = {1, 2, 3};
    auto core = r.pool();
    lose_machine(r, *core);
    // Every attempt is made; then the node is lost for good and calls say why.
    try {
        (void)run(*core, sky::compute<add>(1, 1).retries(5));
        FAIL("a call ran without a node");
    } catch (const sky::NodeLostError& e) {
        INFO(e.what());
        CHECK(std::string(e.what()).find("its replacement failed") != std::string::npos);
    }
    CHECK(r.starts == 4);  // the first machine and three replacements
    // Events reach the handler on the pool's event thread, maybe after the call's error.
    auto attempts = [&] {
        int n = 0;
        for (auto& e : r.all<sky::ErrorEvent>())
            if (e.message.find("replacement failed (attempt") != std::string::npos) ++n;
        return n;
    };
    for (int i = 0; i < 200 && attempts() < 3; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    CHECK(attempts() == 3);
    CHECK(r.all<sky::InstanceReplaced>().empty());
    CHECK(core->instance_count() == 0);
    core->close(false);
    CHECK(r.cloud->live() == 0);
    CHECK(live_children() == 0);
}
