// What the REST clouds' end-to-end tests share (cloud_pool.hpp). The functions the pools run are
// registered here, in every test program that links this.
#include "support/cloud_pool.hpp"

#include <algorithm>
#include <chrono>
#include <future>
#include <set>
#include <thread>

namespace sky::test {

namespace pool_functions {

int node_index() { return sky::instance_info().node; }
int square(int x) { return x * x; }
int slow_node_index(int ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    return sky::instance_info().node;
}

}  // namespace pool_functions

using namespace pool_functions;

sky::Callback EventRecorder::callback() {
    return [this](const sky::Event& e) -> std::optional<sky::Event> {
        std::lock_guard lk(m_);
        lines_.push_back(sky::describe(e));
        events_.push_back(e);
        return std::nullopt;
    };
}

void EventRecorder::check_no_secrets() {
    std::lock_guard lk(m_);
    for (const auto& l : lines_) {
        CHECK(l.find(secret_) == std::string::npos);
        CHECK(l.find("PRIVATE KEY") == std::string::npos);
    }
}

void check_broadcast_and_gather(sky::ComputePool& pool) {
    auto nodes = sky::compute<node_index>() | pool;  // broadcast: one call per node
    std::sort(nodes.begin(), nodes.end());
    CHECK(nodes == std::vector<int>{0, 1});
    std::vector<sky::PendingCompute<int>> calls;
    for (int i = 0; i < 6; ++i) calls.push_back(sky::compute<square>(i));
    CHECK((sky::gather(std::move(calls)) >> pool) == std::vector<int>{0, 1, 4, 9, 16, 25});
}

void check_pool_instances(const sky::ComputePool& pool, const TestHosts& hosts,
                          const ExpectedInstance& want,
                          const std::function<void(const sky::Instance&)>& also) {
    auto inst = pool.instances();
    REQUIRE(static_cast<int>(inst.size()) == hosts.size());
    std::set<std::string> addresses, expected;
    for (const auto& i : inst) {
        CHECK(i.provider == want.provider);
        CHECK(i.instance_type == want.instance_type);
        CHECK(i.spot == want.spot);
        addresses.insert(i.public_ip.value_or(""));
        if (also) also(i);
    }
    for (int h = 0; h < hosts.size(); ++h) expected.insert(hosts.address(h));
    CHECK(addresses == expected);
}

void check_no_remote_workers() {
    CHECK(wait_until([] { return remote_workers() == 0; }, std::chrono::seconds(10)));
}

std::vector<sky::ProvisionAttempt> provision_attempts(const sky::PoolSpec& spec,
                                                      std::size_t min_attempts,
                                                      std::string_view provider) {
    try {
        sky::ComputePool pool{spec};
        FAIL("a pool came up without capacity");
    } catch (const sky::ProvisionError& e) {
        REQUIRE(e.attempts().size() >= min_attempts);
        for (const auto& a : e.attempts()) {
            CHECK(a.provider == provider);
            CHECK(std::string(e.what()).find(a.instance_type) != std::string::npos);
        }
        return e.attempts();
    }
    return {};
}

void check_replacement(sky::ComputePool& pool,
                       const std::function<void(const std::string&)>& take_back) {
    const std::string victim = pool.instances().at(1).id;
    std::vector<sky::PendingCompute<int>> calls;
    for (int i = 0; i < 8; ++i) calls.push_back(sky::compute<slow_node_index>(1500).retries(1));
    auto gather =
        std::async(std::launch::async, [&] { return sky::gather(std::move(calls)) >> pool; });
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    take_back(victim);
    REQUIRE(gather.wait_for(std::chrono::seconds(240)) == std::future_status::ready);
    CHECK(gather.get().size() == 8);
    std::string replacement;
    for (const auto& i : pool.instances())
        if (i.node == 1) replacement = i.id;
    CHECK_FALSE(replacement.empty());
    CHECK(replacement != victim);
    CHECK((sky::compute<node_index>() | pool).size() == 2);
}

}  // namespace sky::test
