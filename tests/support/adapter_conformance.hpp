#pragma once
/// \file One conformance suite for the REST clouds' adapters: each scenario is written once, as a
/// Catch2 template test case over `ConformingClouds` (a std::tuple of fixtures, one per cloud),
/// and every cloud's fake runs it. The one test file that includes this header defines
/// `ConformingClouds` first (and `RetiringClouds`: the clouds whose listing can name a type that
/// a launch then refuses as unknown), from fixtures that include only support/adapter_test.hpp.
/// A new adapter gets every scenario by adding its fixture to the lists.
///
/// A fixture `C` holds its cloud's fake with that cloud's credentials set for its life, and has:
/// - `static constexpr CloudFacts facts`: the provider's name, the pool's two types and whether
///   the cloud lists availability (support/adapter_test.hpp);
/// - `C()`: the fake as it starts, every listed type available;
/// - `explicit C(conformance::Retired)`: the fake lists the pool's cheapest type and refuses it at
/// launch as
///   unknown (only for `RetiringClouds`);
/// - `sky::PoolSpec spec(int nodes)`: a pool of an accelerator the fake lists in at least two
///   types (`facts.first_type` and `facts.second_type`);
/// - `std::unique_ptr<sky::CloudAdapter> adapter()`: a fresh adapter over the fake (no memory of
///   an earlier one: what `sky gc` has);
/// - `sky::test::HttpFaultRate launch_fault(FaultKind)`: a fault on the launch request alone;
/// - `int launches_sent()`: the launch requests the fake received;
/// - `void exhaust(const std::string& type)`: no capacity for that type any more;
/// - `void sell_nothing()`: nothing available: the cloud lists (or sells) no type now;
/// - `sky::Offer unknown_offer()`: an offer of a type the cloud does not know;
/// - `int infra_things(int machines)`: how many lines infra_left() names for a pool with this
///   many machines;
/// - `int alive()`, `std::string left()`: machines not ended; what else of a pool is left
///   (keys, firewalls, scripts), "" when nothing is;
/// - `HttpFake& http()`: the fake's requests.
#include <algorithm>
#include <catch2/catch.hpp>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "providers/cloud/cloud_backend.hpp"
#include "sky/sky.hpp"
#include "support/adapter_test.hpp"

namespace sky::test::conformance {

inline constexpr const char* kPool = "0123456789abcdef";

/// The cloud layer's backend for pool kPool over a fresh adapter of `cloud`.
template <class Cloud>
std::unique_ptr<sky::detail::Backend> backend(Cloud& cloud, const sky::PoolSpec& spec) {
    return sky::detail::make_cloud_backend(cloud.adapter(),
                                           sky::detail::BackendContext{spec, kPool, nullptr});
}

/// The instance types of `offers`.
inline std::set<std::string> types_of(const std::vector<sky::Offer>& offers) {
    std::set<std::string> out;
    for (const auto& o : offers) out.insert(o.instance_type);
    return out;
}

/// The embedded catalog's types of this provider that `listed` does not name (and that are no
/// part of a listed name, so that finding one in a request means it was asked for).
inline std::vector<std::string> unlisted_catalog_types(const char* provider,
                                                       const std::set<std::string>& listed) {
    std::set<std::string> out;
    for (const auto& o : sky::Catalog::embedded().offers(provider)) {
        if (listed.count(o.instance_type)) continue;
        const bool part = std::any_of(listed.begin(), listed.end(), [&](const std::string& l) {
            return l.find(o.instance_type) != std::string::npos;
        });
        if (!part) out.insert(o.instance_type);
    }
    return {out.begin(), out.end()};
}

}  // namespace sky::test::conformance

// Each scenario below runs once per cloud in ConformingClouds (or RetiringClouds).

TEMPLATE_LIST_TEST_CASE("conformance: the cloud layer provisions 2 machines and ends them all",
                        "[conformance]", ConformingClouds) {
    namespace c = sky::test::conformance;
    TestType cloud;
    auto b = c::backend(cloud, cloud.spec(2));
    b->provision(2, sky::test::ignore_events());
    CHECK(cloud.alive() == 2);
    // From the pool id alone (`sky gc`): the pool's machines and its infrastructure.
    auto other = cloud.adapter();
    CHECK(other->list(c::kPool).size() == 2);
    CHECK(other->infra_left(c::kPool).size() == static_cast<std::size_t>(cloud.infra_things(2)));
    b->stop_all();
    CHECK(cloud.alive() == 0);
    CHECK(cloud.left() == "");
    CHECK(other->list(c::kPool).empty());
    CHECK(other->infra_left(c::kPool).empty());
}

TEMPLATE_LIST_TEST_CASE(
    "conformance: machines whose launch answers are lost are found by the pool's tag and used, "
    "each launched once",
    "[conformance]", ConformingClouds) {
    namespace c = sky::test::conformance;
    sky::test::for_each_lost_answer([&](sky::test::FaultKind lost) {
        TestType cloud;
        // Every launch is carried out; no answer arrives whole.
        cloud.http().add_fault_rate(cloud.launch_fault(lost));
        auto b = c::backend(cloud, cloud.spec(2));
        b->provision(2, sky::test::ignore_events());
        cloud.http().clear_fault_rates();
        CHECK(cloud.alive() == 2);
        CHECK(cloud.launches_sent() == 2);
        b->stop_all();
        CHECK(cloud.alive() == 0);
        CHECK(cloud.left() == "");
    });
}

TEMPLATE_LIST_TEST_CASE(
    "conformance: a type without capacity moves the pool to the next offer, and none left is a "
    "ProvisionError",
    "[conformance]", ConformingClouds) {
    namespace c = sky::test::conformance;
    TestType cloud;
    cloud.exhaust(TestType::facts.first_type);
    {
        // Tried and refused, or never offered where the cloud lists what is available.
        sky::test::EventLog log;
        auto b = c::backend(cloud, cloud.spec(1));
        b->provision(1, log.sink());
        const auto tried = log.tried();
        REQUIRE_FALSE(tried.empty());
        CHECK(tried.back() == TestType::facts.second_type);
        CHECK(cloud.alive() == 1);
        b->stop_all();
        CHECK(cloud.alive() == 0);
    }
    cloud.exhaust(TestType::facts.second_type);
    auto b = c::backend(cloud, cloud.spec(1));
    try {
        b->provision(1, sky::test::ignore_events());
        FAIL("provisioned without capacity");
    } catch (const sky::ProvisionError& e) {
        INFO(e.what());
        for (const auto& a : e.attempts())
            CHECK((a.instance_type == TestType::facts.first_type ||
                   a.instance_type == TestType::facts.second_type));
    }
    b->stop_all();
    CHECK(cloud.alive() == 0);
    CHECK(cloud.left() == "");
}

TEMPLATE_LIST_TEST_CASE(
    "conformance: nothing available is a ProvisionError, and no request names a type the cloud "
    "never listed",
    "[conformance]", ConformingClouds) {
    namespace c = sky::test::conformance;
    std::set<std::string> listed;
    {
        TestType normal;
        listed = c::types_of(normal.adapter()->live_offers(sky::Catalog::embedded(), {},
                                                           sky::test::ignore_events()));
    }
    REQUIRE_FALSE(listed.empty());
    const auto unlisted = c::unlisted_catalog_types(TestType::facts.provider, listed);
    REQUIRE_FALSE(unlisted.empty());  // else the check below could not fail
    TestType cloud;
    cloud.sell_nothing();
    auto b = c::backend(cloud, cloud.spec(1));
    try {
        b->provision(1, sky::test::ignore_events());
        FAIL("provisioned with nothing available");
    } catch (const sky::ProvisionError& e) {
        const std::string what = e.what();
        INFO(what);
        for (const auto& a : e.attempts()) CHECK(listed.count(a.instance_type));
        // Where the listing says so, the error does, naming the provider; else each attempt's
        // refusal is the cloud's own.
        if (TestType::facts.lists_availability)
            CHECK(what.find("nothing is available now") != std::string::npos);
        else
            CHECK_FALSE(e.attempts().empty());
    }
    for (const auto& r : cloud.http().requests())
        for (const auto& t : unlisted) {
            INFO(r.method << " " << r.target << " " << r.body);
            CHECK(r.target.find(t) == std::string::npos);
            CHECK(r.body.find(t) == std::string::npos);
        }
    if (TestType::facts.lists_availability) CHECK(cloud.launches_sent() == 0);
    b->stop_all();
    CHECK(cloud.alive() == 0);
    CHECK(cloud.left() == "");
}

TEMPLATE_LIST_TEST_CASE("conformance: a type the cloud does not know is UnknownInstanceTypeError",
                        "[conformance]", ConformingClouds) {
    TestType cloud;
    auto a = cloud.adapter();
    (void)a->live_offers(sky::Catalog::embedded(), {}, sky::test::ignore_events());
    CHECK_THROWS_AS(a->launch(sky::test::launch_request(cloud.unknown_offer())),
                    sky::UnknownInstanceTypeError);
    CHECK(cloud.alive() == 0);
}

TEMPLATE_LIST_TEST_CASE(
    "conformance: a type the cloud lists and then refuses as unknown moves the pool to the next "
    "offer, never tried again",
    "[conformance]", RetiringClouds) {
    namespace c = sky::test::conformance;
    TestType cloud(c::Retired{});
    sky::test::EventLog log;
    auto b = c::backend(cloud, cloud.spec(1));
    b->provision(1, log.sink());
    const auto tried = log.tried();
    CHECK(tried ==
          std::vector<std::string>{TestType::facts.first_type, TestType::facts.second_type});
    CHECK(cloud.alive() == 1);
    b->stop_all();
    CHECK(cloud.alive() == 0);
}

TEMPLATE_LIST_TEST_CASE(
    "conformance: what a killed client left is found and ended from the pool id alone",
    "[conformance]", ConformingClouds) {
    namespace c = sky::test::conformance;
    TestType cloud;
    {
        // A client makes the pool's infrastructure and one machine, then is killed.
        auto client = cloud.adapter();
        const auto offers =
            client->live_offers(sky::Catalog::embedded(), {}, sky::test::ignore_events());
        sky::LaunchRequest r =
            sky::test::launch_request(sky::test::offer_of(offers, TestType::facts.first_type));
        r.ssh_public_key += "-" + std::string(c::kPool);  // commented "sky-<pool id>"
        r.client_token = std::string("sky-") + c::kPool + "-0-0-0d";
        client->create_infra({c::kPool, r.name, r.ssh_public_key}, sky::test::ignore_events());
        (void)client->launch(r);
    }
    REQUIRE(cloud.alive() == 1);
    auto gc = cloud.adapter();
    const auto machines = gc->list(c::kPool);
    REQUIRE(machines.size() == 1);
    CHECK(machines[0].pool_id == c::kPool);
    CHECK(gc->infra_left(c::kPool).size() == static_cast<std::size_t>(cloud.infra_things(1)));
    CHECK(gc->list("0aaaaaaaaaaaaaaa").empty());  // another pool's: not ours
    CHECK(gc->infra_left("0aaaaaaaaaaaaaaa").empty());
    gc->terminate({machines[0].id});
    CHECK(cloud.alive() == 0);
    gc->delete_infra(c::kPool);
    CHECK(gc->infra_left(c::kPool).empty());
    CHECK(cloud.left() == "");
}
