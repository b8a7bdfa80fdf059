// sky::AWS end to end: the real backend against the fake EC2, whose instances are test hosts with
// a real sshd, so the pinned host key, the imported key pair and the shipped worker are all real.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "aws/ec2_client.hpp"
#include "fakes/ec2/fake_ec2.hpp"
#include "fakes/ec2/fake_imds.hpp"
#include "hosts/test_hosts.hpp"
#include "ledger/ledger.hpp"
#include "providers/aws/scripts.hpp"
#include "providers/cloud/node_keys.hpp"
#include "providers/registry/registry.hpp"
#include "sky/sky.hpp"
#include "ssh/session.hpp"
#include "support/adapter_test.hpp"
#include "support/capture_stderr.hpp"
#include "support/run_log.hpp"
#include "support/scoped_env.hpp"
#include "support/temp_home.hpp"
#include "util/shell.hpp"

using sky::test::Ec2Fault;
using sky::test::FakeEc2;
using sky::test::FakeImds;
using sky::test::FaultKind;
using sky::test::TestHosts;

namespace aws_pool {

int node_index() { return sky::instance_info().node; }

const std::string kKey = "AKIDSKYAWSE2ETEST001";
const std::string kSecret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYSKYE2ESECRET";

std::string model_path() {
    const char* dir = std::getenv("SKY_TESTDATA_DIR");
    return std::string(dir && *dir ? dir : SKY_TESTDATA_DIR) + "/ec2-model/service-2.json";
}

// Sets the process environment for the duration of a test (the pool reads it).
struct Env {
    Env() {
        ::setenv("AWS_ACCESS_KEY_ID", kKey.c_str(), 1);
        ::setenv("AWS_SECRET_ACCESS_KEY", kSecret.c_str(), 1);
        ::unsetenv("AWS_SESSION_TOKEN");
        ::setenv("SKY_AWS_SSH_USER", "root", 1);  // test hosts authorize root
    }
    ~Env() {
        ::unsetenv("AWS_ACCESS_KEY_ID");
        ::unsetenv("AWS_SECRET_ACCESS_KEY");
        ::unsetenv("SKY_AWS_SSH_USER");
    }
};

std::string instance_types_path() {
    const char* dir = std::getenv("SKY_TESTDATA_DIR");
    return std::string(dir && *dir ? dir : SKY_TESTDATA_DIR) +
           "/ec2-instance-types/accelerated-instance-types.json";
}

// overrides: JSON merge patches over the test data's DescribeInstanceTypes answers, by type;
// linger: how long a terminated instance's network interface outlives it.
FakeEc2 make_fake(TestHosts* hosts, bool install_host_key = true,
                  std::map<std::string, nlohmann::json> overrides = {},
                  std::chrono::milliseconds linger = {}) {
    sky::test::FakeEc2Options o;
    o.interface_linger = linger;
    if (std::filesystem::exists(instance_types_path()))
        o.instance_types_path = instance_types_path();
    o.instance_type_overrides = std::move(overrides);
    o.install_host_key = install_host_key;
    o.access_key_id = kKey;
    o.secret_access_key = kSecret;
    o.model_path = model_path();
    o.hosts = hosts;
    return FakeEc2(o);
}

// Every event as text, to search for secrets.
struct Recorder {
    std::mutex m;
    std::vector<std::string> lines;
    std::vector<sky::Event> events;
    sky::Callback callback() {
        return [this](const sky::Event& e) -> std::optional<sky::Event> {
            std::lock_guard lk(m);
            lines.push_back(sky::describe(e));
            events.push_back(e);
            return std::nullopt;
        };
    }
    template <class T>
    int count() {
        std::lock_guard lk(m);
        int n = 0;
        for (auto& e : events) n += std::holds_alternative<T>(e) ? 1 : 0;
        return n;
    }
    void check_no_secrets() {
        std::lock_guard lk(m);
        for (const auto& l : lines) {
            CHECK(l.find(kSecret) == std::string::npos);
            CHECK(l.find("PRIVATE KEY") == std::string::npos);
        }
    }
};

sky::PoolSpec spec_for(const FakeEc2& fake, int nodes, Recorder& rec) {
    sky::PoolSpec spec;
    spec.provider = sky::AWS{.region = "us-east-1", .endpoint = fake.endpoint()};
    spec.nodes = nodes;
    spec.accelerator = "A100";
    spec.display = sky::Display::quiet;
    spec.on_event = rec.callback();
    return spec;
}

// Instances that have not reached shutting-down or terminated.
int live_instances(const FakeEc2& fake) {
    int n = 0;
    for (const auto& i : fake.instances()) {
        std::string s = i["State"]["Name"];
        if (s != "terminated" && s != "shutting-down") ++n;
    }
    return n;
}

// Asks the fake as any EC2 client would (to inspect key pairs and security groups).
nlohmann::json ask(const FakeEc2& fake, const std::string& action,
                   const sky::detail::aws::QueryParams& p = {}) {
    sky::detail::aws::Ec2ClientConfig cc;
    cc.endpoint = fake.endpoint();
    cc.credentials = {kKey, kSecret, ""};
    return sky::detail::aws::Ec2Client(cc).call_json(action, p);
}

std::vector<std::string> sky_key_pairs(const FakeEc2& fake) {
    std::vector<std::string> names;
    auto r = ask(fake, "DescribeKeyPairs");
    if (r.contains("keySet") && r["keySet"].is_array())
        for (const auto& k : r["keySet"]) names.push_back(k.value("keyName", ""));
    return names;
}

std::vector<nlohmann::json> sky_groups(const FakeEc2& fake) {
    std::vector<nlohmann::json> groups;
    auto r = ask(fake, "DescribeSecurityGroups");
    if (r.contains("securityGroupInfo") && r["securityGroupInfo"].is_array())
        for (const auto& g : r["securityGroupInfo"])
            if (g.value("groupName", "").rfind("sky-", 0) == 0) groups.push_back(g);
    return groups;
}

std::string launch(const FakeEc2& fake, const std::string& type, const std::string& pool,
                   bool spot);

// Whether any recorded event's text contains `text`.
bool said(Recorder& rec, const std::string& text) {
    std::lock_guard lk(rec.m);
    for (const auto& l : rec.lines)
        if (l.find(text) != std::string::npos) return true;
    return false;
}

std::vector<sky::Offer> a100_offers(sky::Spot spot) {
    return sky::Catalog::embedded().select(
        {.accelerator = sky::Accelerator("A100"), .region = "us-east-1", .spot = spot}, "aws");
}

}  // namespace aws_pool

using namespace aws_pool;

TEST_CASE("aws pool: 2 A100 nodes run a gather and leave no instance running", "[aws_pool]") {
    SKIP_WITHOUT_HOSTS();
    Env env;
    TestHosts hosts(2);
    FakeEc2 fake = make_fake(&hosts);
    Recorder rec;
    {
        sky::ComputePool pool{spec_for(fake, 2, rec)};
        auto nodes = sky::compute<node_index>() | pool;
        std::sort(nodes.begin(), nodes.end());
        CHECK(nodes == std::vector<int>{0, 1});
        auto inst = pool.instances();
        REQUIRE(inst.size() == 2);
        std::set<std::string> addresses;
        for (const auto& i : inst) {
            CHECK(i.provider == "aws");
            CHECK(i.instance_type == a100_offers(sky::Spot{}).at(0).instance_type);
            CHECK(i.spot);  // the default strategy is Always
            // Ranked and priced by the live spot price (DescribeSpotPriceHistory), not the catalog.
            CHECK(i.hourly_price == Approx(9.8306));
            CHECK(i.hourly_price > 0);
            CHECK(i.on_demand_price > 0);
            addresses.insert(i.public_ip.value_or(""));
        }
        CHECK(addresses == std::set<std::string>{hosts.address(0), hosts.address(1)});
        CHECK(live_instances(fake) == 2);
        // The pool's key pair and its SSH-only security group exist while it runs.
        auto keys = sky_key_pairs(fake);
        REQUIRE(keys.size() == 1);
        CHECK(keys[0].rfind("sky-", 0) == 0);
        auto groups = sky_groups(fake);
        REQUIRE(groups.size() == 1);
        CHECK(groups[0]["groupName"] == keys[0]);
        // SSH from outside; every port only from the pool's own members (the group itself).
        const auto& rules = groups[0]["ipPermissions"];
        REQUIRE(rules.size() == 2);
        int ssh = 0, members = 0;
        for (const auto& r : rules) {
            if (r.value("fromPort", "") == "22" && r.value("toPort", "") == "22") ++ssh;
            if (r.value("ipProtocol", "") == "-1") {
                ++members;
                CHECK(r.dump().find(groups[0].value("groupId", "?")) != std::string::npos);
                CHECK(r.dump().find("0.0.0.0/0") == std::string::npos);
            }
        }
        CHECK(ssh == 1);
        CHECK(members == 1);
        // The host key each node got came from the client's user-data; the private half is
        // there only.
        for (const auto& i : inst) {
            std::string ud = fake.user_data(i.id);
            CHECK(ud.find("BEGIN OPENSSH PRIVATE KEY") != std::string::npos);
            int h = fake.host_of(i.id);
            REQUIRE(h >= 0);
            std::istringstream pub(hosts.host_public_key(h));
            std::string kind, blob;
            pub >> kind >> blob;
            CHECK(ud.find(blob) != std::string::npos);
        }
        for (const auto& i : fake.instances()) {
            bool tagged = false;
            for (const auto& t : i["Tags"]) tagged = tagged || t["Key"] == "sky:pool";
            CHECK(tagged);
            CHECK(i.value("InstanceLifecycle", "") == "spot");
        }
    }
    CHECK(live_instances(fake) == 0);
    CHECK(sky_key_pairs(fake).empty());
    CHECK(sky_groups(fake).empty());
    CHECK(sky::test::wait_until([] { return sky::test::remote_workers() == 0; },
                                std::chrono::seconds(10)));
    // The fake's endpoint is not AWS's, and this client's address is unknown to it: both are
    // notices on stderr (the aws_notice test), not errors in the event stream.
    CHECK_FALSE(said(rec, "AWS requests signed with your credentials go to"));
    CHECK_FALSE(said(rec, "open to 0.0.0.0/0"));
    CHECK(rec.count<sky::InfraCreating>() == 1);
    CHECK(rec.count<sky::InfraCreated>() == 1);
    CHECK(rec.count<sky::InstanceLaunching>() >= 1);
    CHECK(rec.count<sky::InstanceProvisioned>() == 2);
    for (auto& e : rec.events) {
        if (auto* p = std::get_if<sky::InstanceProvisioned>(&e)) {
            CHECK(p->price_on_demand.value_or(0) > 0);
            CHECK(p->price_spot.has_value());
        }
    }
    rec.check_no_secrets();
}

TEST_CASE("aws pool: leaving the scope by an exception terminates the instances", "[aws_pool]") {
    SKIP_WITHOUT_HOSTS();
    Env env;
    TestHosts hosts(3);
    FakeEc2 fake = make_fake(&hosts);
    Recorder rec;
    try {
        sky::ComputePool pool{spec_for(fake, 2, rec)};
        CHECK((sky::compute<node_index>() | pool).size() == 2);
        CHECK(live_instances(fake) == 2);
        // An instance of this pool the backend never heard of (its RunInstances answer lost):
        // found by its tag and terminated too.
        auto keys = sky_key_pairs(fake);
        REQUIRE(keys.size() == 1);
        (void)launch(fake, "p4d.24xlarge", keys[0].substr(4), false);
        CHECK(live_instances(fake) == 3);
        throw std::runtime_error("user code failed");
    } catch (const std::runtime_error& e) {
        CHECK(std::string(e.what()) == "user code failed");
    }
    CHECK(live_instances(fake) == 0);
    CHECK(fake.instances().size() == 3);
    CHECK(sky::test::wait_until([] { return sky::test::remote_workers() == 0; },
                                std::chrono::seconds(10)));
}

TEST_CASE("aws pool: a capacity error on the first offer moves to the next", "[aws_pool]") {
    SKIP_WITHOUT_HOSTS();
    Env env;
    TestHosts hosts(1);
    FakeEc2 fake = make_fake(&hosts);
    Recorder rec;
    auto offers = a100_offers(sky::Spot{});
    REQUIRE(offers.size() >= 2);
    fake.inject_fault(Ec2Fault{.action = "RunInstances",
                               .status = 500,
                               .code = "InsufficientInstanceCapacity",
                               .message = "We currently do not have sufficient capacity.",
                               .count = 1});
    {
        sky::ComputePool pool{spec_for(fake, 1, rec)};
        CHECK((sky::compute<node_index>() >> pool) == 0);
        auto inst = pool.instances();
        REQUIRE(inst.size() == 1);
        CHECK(inst[0].instance_type == offers[1].instance_type);
    }
    CHECK(live_instances(fake) == 0);
    rec.check_no_secrets();
}

TEST_CASE("aws pool: ProvisionError lists every attempt when all offers fail", "[aws_pool]") {
    SKIP_WITHOUT_HOSTS();
    Env env;
    TestHosts hosts(1);
    FakeEc2 fake = make_fake(&hosts);
    Recorder rec;
    auto offers = a100_offers(sky::Spot::Never{});
    fake.inject_fault(Ec2Fault{.action = "RunInstances",
                               .status = 500,
                               .code = "InsufficientInstanceCapacity",
                               .message = "No capacity.",
                               .count = 1000});
    auto spec = spec_for(fake, 1, rec);
    spec.spot = sky::Spot::Never{};
    try {
        sky::ComputePool pool{spec};
        (void)(sky::compute<node_index>() >> pool);
        FAIL("no ProvisionError");
    } catch (const sky::ProvisionError& e) {
        const std::string what = e.what();
        REQUIRE(e.attempts().size() == offers.size());
        for (std::size_t i = 0; i < offers.size(); ++i) {
            CHECK(e.attempts()[i].instance_type == offers[i].instance_type);
            CHECK(e.attempts()[i].provider == "aws");
            CHECK_FALSE(e.attempts()[i].spot);
            CHECK(e.attempts()[i].error.find("InsufficientInstanceCapacity") != std::string::npos);
            CHECK(what.find(offers[i].instance_type) != std::string::npos);
        }
        CHECK(what.find(kSecret) == std::string::npos);
    }
    CHECK(live_instances(fake) == 0);
    CHECK(sky_key_pairs(fake).empty());
    CHECK(sky_groups(fake).empty());
    rec.check_no_secrets();
}

TEST_CASE("aws pool: a key pair import whose answer is lost still starts the pool", "[aws_pool]") {
    SKIP_WITHOUT_HOSTS();
    Env env;
    // Each attempt that waits for a lost answer gives up after 1 s, not the default minute.
    sky::test::ScopedEnv scoped(
        std::vector<std::pair<std::string, std::string>>{{"SKY_HTTP_ATTEMPT_TIMEOUT_MS", "1000"}});
    TestHosts hosts(1);
    FakeEc2 fake = make_fake(&hosts);
    Recorder rec;
    // A key of the pool's name is there already (a stale one), so sky replaces it; the answer
    // to that import is lost, and the client's retry meets the key it has just made.
    fake.inject_fault(Ec2Fault{.action = "ImportKeyPair",
                               .status = 400,
                               .code = "InvalidKeyPair.Duplicate",
                               .message = "The keypair already exists."});
    fake.inject_fault(Ec2Fault{.action = "ImportKeyPair", .lose_answer = true});
    {
        sky::ComputePool pool{spec_for(fake, 1, rec)};
        CHECK((sky::compute<node_index>() >> pool) == 0);
        CHECK(sky_key_pairs(fake).size() == 1);
    }
    CHECK(live_instances(fake) == 0);
    CHECK(sky_key_pairs(fake).empty());
    rec.check_no_secrets();
}

TEST_CASE(
    "aws pool: instances whose RunInstances answers are lost are found by the pool's tag and "
    "used, each launched once",
    "[aws_pool]") {
    SKIP_WITHOUT_HOSTS();
    Env env;
    sky::test::ScopedEnv scoped(
        std::vector<std::pair<std::string, std::string>>{{"SKY_HTTP_ATTEMPT_TIMEOUT_MS", "1000"}});
    TestHosts hosts(2);
    for (FaultKind lost : {FaultKind::malformed, FaultKind::truncated}) {
        INFO("the RunInstances answers are " << sky::test::fault_kind_name(lost));
        FakeEc2 fake = make_fake(&hosts);
        Recorder rec;
        // Every RunInstances is carried out; no answer arrives whole (a truncated one also
        // after the client's retries, which carry the same ClientToken).
        fake.add_fault_rate(
            {.action = "RunInstances", .kinds = {lost}, .probability = 1.0, .seed = 7});
        {
            sky::ComputePool pool{spec_for(fake, 2, rec)};
            fake.clear_fault_rates();
            auto nodes = sky::compute<node_index>() | pool;
            std::sort(nodes.begin(), nodes.end());
            CHECK(nodes == std::vector<int>{0, 1});
            CHECK(fake.instances().size() == 2);  // none launched twice
        }
        CHECK(live_instances(fake) == 0);
        rec.check_no_secrets();
    }
}

TEST_CASE("aws pool: throttling (RequestLimitExceeded) is retried", "[aws_pool]") {
    SKIP_WITHOUT_HOSTS();
    Env env;
    TestHosts hosts(1);
    FakeEc2 fake = make_fake(&hosts);
    Recorder rec;
    fake.inject_fault(Ec2Fault{.action = "RunInstances", .status = 503, .count = 2});
    fake.inject_fault(Ec2Fault{.action = "DescribeInstances", .status = 503, .count = 1});
    const int before = fake.request_count();
    {
        sky::ComputePool pool{spec_for(fake, 1, rec)};
        CHECK((sky::compute<node_index>() >> pool) == 0);
        auto inst = pool.instances();
        REQUIRE(inst.size() == 1);
        CHECK(inst[0].instance_type == a100_offers(sky::Spot{}).at(0).instance_type);
    }
    CHECK(fake.request_count() > before);
    CHECK(fake.instances().size() == 1);  // the retries reused the ClientToken: one instance
    CHECK(live_instances(fake) == 0);
}

TEST_CASE("aws pool: a partial launch failure terminates what started", "[aws_pool]") {
    SKIP_WITHOUT_HOSTS();
    Env env;
    TestHosts hosts(1);  // two nodes wanted, room for one: the second launch has no capacity
    FakeEc2 fake = make_fake(&hosts);
    Recorder rec;
    auto spec = spec_for(fake, 2, rec);
    spec.spot = sky::Spot::Never{};
    CHECK_THROWS_AS(sky::ComputePool{spec}, sky::ProvisionError);
    auto all = fake.instances();
    CHECK(all.size() >= 1);  // the first node of each offer did start
    CHECK(live_instances(fake) == 0);
    CHECK(sky_key_pairs(fake).empty());
    CHECK(sky_groups(fake).empty());
    CHECK(sky::test::wait_until([] { return sky::test::remote_workers() == 0; },
                                std::chrono::seconds(10)));
    rec.check_no_secrets();
}

TEST_CASE("aws pool: missing credentials are a clear error without secrets", "[aws_pool]") {
    ::unsetenv("AWS_ACCESS_KEY_ID");
    ::unsetenv("AWS_SECRET_ACCESS_KEY");
    ::setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/sky-credentials", 1);
    sky::PoolSpec spec;
    spec.provider = sky::AWS{.endpoint = "http://127.0.0.1:1"};
    spec.accelerator = "A100";
    spec.display = sky::Display::quiet;
    try {
        sky::ComputePool pool{spec};
        FAIL("no error");
    } catch (const sky::Error& e) {
        std::string what = e.what();
        CHECK(what.find("credentials") != std::string::npos);
        CHECK(what.find("AWS_ACCESS_KEY_ID") != std::string::npos);
    }
    ::unsetenv("AWS_SHARED_CREDENTIALS_FILE");
}

namespace aws_pool {

// Launches one instance straight through the EC2 client (no pool), tagged when pool is given.
std::string launch(const FakeEc2& fake, const std::string& type, const std::string& pool,
                   bool spot) {
    namespace aws = sky::detail::aws;
    aws::Ec2ClientConfig cc;
    cc.endpoint = fake.endpoint();
    cc.credentials = {kKey, kSecret, ""};
    aws::Ec2Client client(cc);
    aws::QueryParams p;
    p.set("ImageId", "ami-0ubuntu000000001");
    p.set("InstanceType", type);
    p.set("MinCount", 1);
    p.set("MaxCount", 1);
    if (!pool.empty()) {
        p.set("TagSpecification.1.ResourceType", "instance");
        p.set("TagSpecification.1.Tag.1.Key", "sky:pool");
        p.set("TagSpecification.1.Tag.1.Value", pool);
    }
    if (spot) p.set("InstanceMarketOptions.MarketType", "spot");
    return client.call("RunInstances", p)
        .child("instancesSet")
        ->child("item")
        ->child_text("instanceId");
}

}  // namespace aws_pool

TEST_CASE("sky ls --provider aws lists the tagged instances, never a credential", "[aws_ls]") {
    if (!std::filesystem::exists(model_path())) {
        WARN("skipped: no EC2 model at " << model_path() << " (SKY_TESTDATA_DIR)");
        return;
    }
    Env env;
    FakeEc2 fake = make_fake(nullptr);
    const std::string a = launch(fake, "p4d.24xlarge", "pool0001", true);
    const std::string b = launch(fake, "g5.xlarge", "pool0002", false);
    const std::string untagged = launch(fake, "t3.micro", "", false);
    const std::string gone = launch(fake, "g5.xlarge", "pool0003", false);
    fake.set_instance_state(gone, "terminated");
    ::setenv("AWS_ENDPOINT_URL_EC2", fake.endpoint().c_str(), 1);
    auto r = sky::test::run_command({SKY_CLI_PATH, "ls", "--provider", "aws"});
    INFO(r.output);
    CHECK(r.status == 0);
    CHECK(r.output.find("INSTANCE") != std::string::npos);
    CHECK(r.output.find("POOL") != std::string::npos);
    // One row per tagged live instance, with its facts.
    std::istringstream lines(r.output);
    std::map<std::string, std::vector<std::string>> rows;
    for (std::string line; std::getline(lines, line);) {
        std::istringstream words(line);
        std::vector<std::string> w;
        for (std::string x; words >> x;) w.push_back(x);
        if (w.size() > 1 && w[0] == "aws") rows[w[1]] = w;
    }
    REQUIRE(rows.count(a));
    REQUIRE(rows.count(b));
    CHECK_FALSE(rows.count(untagged));
    CHECK_FALSE(rows.count(gone));
    // PROVIDER INSTANCE POOL TYPE STATE ADDRESS SPOT LAUNCHED POOL HERE ("no ledger here").
    REQUIRE(rows[a].size() == 11);
    CHECK(rows[a][2] == "pool0001");
    CHECK(rows[a][3] == "p4d.24xlarge");
    CHECK(rows[a][4] == "running");
    CHECK(rows[a][5].rfind("203.0.113.", 0) == 0);
    CHECK(rows[a][6] == "yes");
    CHECK(rows[a][7].rfind("20", 0) == 0);  // launchTime, ISO 8601
    CHECK(rows[b][2] == "pool0002");
    CHECK(rows[b][6] == "no");
    CHECK(r.output.find(kSecret) == std::string::npos);
    CHECK(r.output.find(kKey) == std::string::npos);

    auto with_all = sky::test::run_command({SKY_CLI_PATH, "ls", "--provider", "aws", "--all"});
    CHECK(with_all.output.find(gone) != std::string::npos);

    // A refused signature: an error naming the failure, still without the secret.
    ::setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret-value-0123456789", 1);
    auto bad = sky::test::run_command({SKY_CLI_PATH, "ls", "--provider", "aws"});
    CHECK(bad.status == 1);
    CHECK(bad.output.find("SignatureDoesNotMatch") != std::string::npos);
    CHECK(bad.output.find("wrong-secret-value-0123456789") == std::string::npos);
    CHECK(bad.output.find(kSecret) == std::string::npos);
    ::unsetenv("AWS_ENDPOINT_URL_EC2");

    auto usage = sky::test::run_command({SKY_CLI_PATH, "ls", "--no-such-flag"});
    CHECK(usage.status == 2);
}

namespace aws_pool {
int sleep_ms(int ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    return sky::instance_info().node;
}
}  // namespace aws_pool

TEST_CASE("aws pool: a spot reclaim seen in DescribeInstances is a preempted node", "[aws_pool]") {
    SKIP_WITHOUT_HOSTS();
    Env env;
    TestHosts hosts(1);
    FakeEc2 fake = make_fake(&hosts);
    Recorder rec;
    {
        sky::ComputePool pool{spec_for(fake, 1, rec)};
        const std::string id = pool.instances().at(0).id;
        REQUIRE(pool.instances().at(0).spot);
        auto call =
            std::async(std::launch::async, [&] { return sky::compute<sleep_ms>(30000) >> pool; });
        std::this_thread::sleep_for(std::chrono::milliseconds(1500));
        // AWS reclaims the capacity: the instance ends and its machine with it.
        fake.set_instance_state(id, "terminated", "Server.SpotInstanceTermination");
        REQUIRE(call.wait_for(std::chrono::seconds(60)) == std::future_status::ready);
        try {
            (void)call.get();
            FAIL("the call survived its node");
        } catch (const sky::NodeLostError& e) {
            CHECK(e.reason() == sky::NodeLostError::Reason::preempted);
            CHECK(e.instance_id() == id);
        }
    }
    CHECK(rec.count<sky::InstancePreempted>() == 1);
    CHECK(live_instances(fake) == 0);
    rec.check_no_secrets();
}

int slow_node_index(int ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    return sky::instance_info().node;
}

TEST_CASE(
    "aws pool: a node preempted in the middle of a gather is replaced, and calls with "
    ".retries(1) re-run on the pool back at its size",
    "[aws_pool]") {
    SKIP_WITHOUT_HOSTS();
    Env env;
    TestHosts hosts(2);  // the reclaimed machine's host serves the replacement
    FakeEc2 fake = make_fake(&hosts);
    Recorder rec;
    std::string victim, replacement;
    {
        sky::ComputePool pool{spec_for(fake, 2, rec)};
        REQUIRE(pool.instances().size() == 2);
        victim = pool.instances().at(1).id;
        std::vector<sky::PendingCompute<int>> calls;
        for (int i = 0; i < 8; ++i) calls.push_back(sky::compute<slow_node_index>(1500).retries(1));
        auto gather =
            std::async(std::launch::async, [&] { return sky::gather(std::move(calls)) >> pool; });
        std::this_thread::sleep_for(std::chrono::milliseconds(700));
        fake.set_instance_state(victim, "terminated", "Server.SpotInstanceTermination");
        REQUIRE(gather.wait_for(std::chrono::seconds(240)) == std::future_status::ready);
        std::vector<int> nodes = gather.get();
        CHECK(nodes.size() == 8);
        // Back at its size, with a new machine in node 1's place.
        auto inst = pool.instances();
        REQUIRE(inst.size() == 2);
        CHECK(pool.instance_count() == 2);
        for (const auto& i : inst)
            if (i.node == 1) replacement = i.id;
        CHECK_FALSE(replacement.empty());
        CHECK(replacement != victim);
        CHECK((sky::compute<node_index>() | pool).size() == 2);
    }
    // Preempted, then launched and provisioned anew, then replaced: in that order.
    std::vector<std::string> order;
    {
        std::lock_guard lk(rec.m);
        for (const auto& e : rec.events) {
            if (auto* p = std::get_if<sky::InstancePreempted>(&e); p && p->instance_id == victim)
                order.push_back("preempted");
            if (auto* p = std::get_if<sky::InstanceProvisioned>(&e);
                p && p->instance_id == replacement)
                order.push_back("provisioned");
            if (auto* p = std::get_if<sky::InstanceReplaced>(&e)) {
                order.push_back("replaced");
                CHECK(p->old_instance_id == victim);
                CHECK(p->new_instance_id == replacement);
                CHECK(p->node == 1);
            }
        }
    }
    CHECK(order == std::vector<std::string>{"preempted", "provisioned", "replaced"});
    CHECK(live_instances(fake) == 0);
    rec.check_no_secrets();
}

TEST_CASE("aws pool: if-available falls back to on-demand, a fraction mixes spot and on-demand",
          "[aws_pool]") {
    SKIP_WITHOUT_HOSTS();
    Env env;
    TestHosts hosts(2);
    FakeEc2 fake = make_fake(&hosts);
    Recorder rec;
    const std::string first = a100_offers(sky::Spot::IfAvailable{}).at(0).instance_type;
    {
        // No spot capacity for the first launch: the node runs on-demand on the same offer.
        fake.inject_fault(Ec2Fault{.action = "RunInstances",
                                   .status = 500,
                                   .code = "InsufficientInstanceCapacity",
                                   .message = "No spot capacity.",
                                   .count = 1});
        auto spec = spec_for(fake, 1, rec);
        spec.spot = "if-available";
        sky::ComputePool pool{spec};
        CHECK((sky::compute<node_index>() >> pool) == 0);
        auto inst = pool.instances().at(0);
        CHECK(inst.instance_type == first);
        CHECK_FALSE(inst.spot);
        CHECK(inst.hourly_price == inst.on_demand_price);
    }
    CHECK(live_instances(fake) == 0);
    {
        auto spec = spec_for(fake, 2, rec);
        spec.spot = 0.5;
        sky::ComputePool pool{spec};
        CHECK((sky::compute<node_index>() | pool).size() == 2);
        int spot = 0;
        for (const auto& i : pool.instances()) spot += i.spot ? 1 : 0;
        CHECK(spot == 1);
        int lifecycle_spot = 0;
        for (const auto& i : fake.instances()) {
            std::string st = i["State"]["Name"];
            if (st == "running" && i.value("InstanceLifecycle", "") == "spot") ++lifecycle_spot;
        }
        CHECK(lifecycle_spot == 1);
    }
    CHECK(live_instances(fake) == 0);
}

TEST_CASE("aws pool: credentials from a profile, the endpoint from AWS_ENDPOINT_URL_EC2",
          "[aws_pool]") {
    SKIP_WITHOUT_HOSTS();
    Env env;
    TestHosts hosts(1);
    FakeEc2 fake = make_fake(&hosts);
    Recorder rec;
    ::unsetenv("AWS_ACCESS_KEY_ID");
    ::unsetenv("AWS_SECRET_ACCESS_KEY");
    auto file = hosts.dir() / "aws-credentials";
    {
        std::ofstream out(file);
        out << "[default]\naws_access_key_id = AKIDWRONGDEFAULT\naws_secret_access_key = nope\n"
            << "[sky-e2e]\naws_access_key_id = " << kKey << "\naws_secret_access_key = " << kSecret
            << "\n";
    }
    ::setenv("AWS_SHARED_CREDENTIALS_FILE", file.c_str(), 1);
    ::setenv("AWS_ENDPOINT_URL_EC2", fake.endpoint().c_str(), 1);
    auto spec = spec_for(fake, 1, rec);
    spec.provider = sky::AWS{.profile = "sky-e2e"};  // no endpoint: the env names the fake
    {
        sky::ComputePool pool{spec};
        CHECK((sky::compute<node_index>() >> pool) == 0);
    }
    CHECK(live_instances(fake) == 0);
    CHECK(fake.auth_failures() == 0);
    ::unsetenv("AWS_SHARED_CREDENTIALS_FILE");
    ::unsetenv("AWS_ENDPOINT_URL_EC2");
    rec.check_no_secrets();
}

TEST_CASE("aws pool: a node that does not present the pinned host key is refused", "[aws_pool]") {
    SKIP_WITHOUT_HOSTS();
    Env env;
    TestHosts hosts(1);
    FakeEc2 fake = make_fake(&hosts, /*install_host_key=*/false);
    Recorder rec;
    ::setenv("SKY_AWS_BOOT_WAIT_S", "3", 1);
    try {
        sky::ComputePool pool{spec_for(fake, 1, rec)};
        FAIL("connected to a host with another key");
    } catch (const sky::Error& e) {
        const std::string what = e.what();
        INFO(what);
        CHECK(what.find(hosts.host_key_fingerprint(0)) != std::string::npos);
        CHECK(what.find(kSecret) == std::string::npos);
        CHECK(what.find("PRIVATE KEY") == std::string::npos);
    }
    ::unsetenv("SKY_AWS_BOOT_WAIT_S");
    CHECK(live_instances(fake) == 0);
    CHECK(sky_key_pairs(fake).empty());
    rec.check_no_secrets();
}

TEST_CASE("aws pool: selection follows EC2's live instance types over the catalog's facts",
          "[aws_pool]") {
    SKIP_WITHOUT_HOSTS();
    if (!std::filesystem::exists(instance_types_path())) {
        WARN("skipped: no instance types at " << instance_types_path());
        return;
    }
    Env env;
    // The catalog alone: p4d.24xlarge is the 40 GB A100 x8, p4de.24xlarge the 80 GB one, dearer.
    auto catalog_pick = [](const char* accelerator) {
        auto offers = sky::Catalog::embedded().select(
            {.accelerator = sky::Accelerator(accelerator), .region = "us-east-1"}, "aws");
        return offers.empty() ? std::string() : offers.front().instance_type;
    };
    REQUIRE(catalog_pick("A100-80GB") == "p4de.24xlarge");
    REQUIRE(catalog_pick("A100:8") == "p4d.24xlarge");
    auto gpus = [](int count, int mib) {
        return nlohmann::json{{"GpuInfo",
                               {{"Gpus",
                                 {{{"Name", "A100"},
                                   {"Manufacturer", "NVIDIA"},
                                   {"Count", count},
                                   {"MemoryInfo", {{"SizeInMiB", mib}}}}}},
                                {"TotalGpuMemoryInMiB", count * mib}}}};
    };
    // Runs one pool of one node on a fake whose instance types carry `overrides`; returns the
    // instance type the pool got (as the pool and the fake both say).
    auto provisioned = [&](const char* accelerator, std::map<std::string, nlohmann::json> overrides,
                           Recorder& rec, std::optional<Ec2Fault> fault = std::nullopt) {
        TestHosts hosts(1);
        FakeEc2 fake = make_fake(&hosts, true, std::move(overrides));
        if (fault) fake.inject_fault(*fault);
        std::string type;
        {
            auto spec = spec_for(fake, 1, rec);
            spec.accelerator = accelerator;
            sky::ComputePool pool{spec};
            CHECK((sky::compute<node_index>() >> pool) == 0);
            auto inst = pool.instances();
            REQUIRE(inst.size() == 1);
            type = inst[0].instance_type;
            auto launched = fake.instances();
            REQUIRE(launched.size() == 1);
            CHECK(launched[0]["InstanceType"] == type);
        }
        CHECK(live_instances(fake) == 0);
        rec.check_no_secrets();
        return type;
    };
    auto said = [](Recorder& rec, const std::string& text) {
        std::lock_guard lk(rec.m);
        for (const auto& l : rec.lines)
            if (l.find(text) != std::string::npos) return true;
        return false;
    };

    // EC2 says p4d.24xlarge has 80 GB A100s: it now serves "A100-80GB", and is the cheaper one.
    Recorder added;
    CHECK(provisioned("A100-80GB", {{"p4d.24xlarge", gpus(8, 81920)}}, added) == "p4d.24xlarge");
    CHECK_FALSE(said(added, "instance types unavailable"));

    // EC2 says p4d.24xlarge has only 4 GPUs: the catalog's pick for "A100:8" is out.
    Recorder removed;
    CHECK(provisioned("A100:8", {{"p4d.24xlarge", gpus(4, 40960)}}, removed) == "p4de.24xlarge");

    // DescribeInstanceTypes refused: an ErrorEvent, and the catalog's facts decide.
    Recorder refused;
    CHECK(provisioned("A100-80GB", {{"p4d.24xlarge", gpus(8, 81920)}}, refused,
                      Ec2Fault{.action = "DescribeInstanceTypes",
                               .status = 403,
                               .code = "UnauthorizedOperation",
                               .message = "You are not authorized to perform this operation.",
                               .count = 100}) == "p4de.24xlarge");
    CHECK(said(refused, "instance types unavailable, using the catalog's facts"));
    CHECK(said(refused, "UnauthorizedOperation"));
}

TEST_CASE("aws pool: a spot reclaim seen on the node by its watchdog is a preempted node",
          "[aws_pool]") {
    SKIP_WITHOUT_HOSTS();
    Env env;
    // On EC2 the watchdog asks the instance metadata (spot/instance-action); a test host has
    // none, so the probe is a file in the host's own /tmp.
    const std::string mark = "/tmp/sky-test-reclaim-" + std::to_string(::getpid());
    ::setenv("SKY_AWS_PREEMPTION_PROBE", ("test -f " + mark).c_str(), 1);
    struct Cleanup {  // also when an assertion ends the test early
        std::filesystem::path path;
        ~Cleanup() {
            ::unsetenv("SKY_AWS_PREEMPTION_PROBE");
            std::error_code ec;
            if (!path.empty()) std::filesystem::remove(path, ec);
        }
    } cleanup;
    TestHosts hosts(1);
    FakeEc2 fake = make_fake(&hosts);
    Recorder rec;
    {
        sky::ComputePool pool{spec_for(fake, 1, rec)};
        REQUIRE(pool.instances().at(0).spot);
        const int h = fake.host_of(pool.instances().at(0).id);
        REQUIRE(h >= 0);
        cleanup.path = hosts.host_path(h, mark);  // the host's /tmp, seen from here
        auto call =
            std::async(std::launch::async, [&] { return sky::compute<sleep_ms>(30000) >> pool; });
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        std::ofstream(cleanup.path) << "reclaim\n";
        REQUIRE(call.wait_for(std::chrono::seconds(60)) == std::future_status::ready);
        try {
            (void)call.get();
            FAIL("the call survived its node");
        } catch (const sky::NodeLostError& e) {
            CHECK(e.reason() == sky::NodeLostError::Reason::preempted);
            CHECK(std::string(e.what()).find("reclaimed") != std::string::npos);
        }
    }
    CHECK(rec.count<sky::InstancePreempted>() == 1);
    CHECK(live_instances(fake) == 0);
    rec.check_no_secrets();
}

namespace aws_pool {

// What one rank saw of a notice (api.md §10a).
struct NoticeSeen {
    int node = -1;
    std::int64_t saved = -2;  // the step it saved (-2: no notice came)
    std::int64_t checkpoint_step = -2;
    double seen_at = 0;   // system clock, seconds
    double deadline = 0;  // the notice's, seconds
    std::string instance_id;
    std::string reason;

    template <class A>
    void serialize(A& ar) {
        ar(node, saved, checkpoint_step, seen_at, deadline, instance_id, reason);
    }
};

double epoch_seconds(std::chrono::system_clock::time_point t) {
    return std::chrono::duration<double>(t.time_since_epoch()).count();
}

// api.md §10a's loop: report each step; at a notice, save the agreed step and return (at most
// 60 s of steps).
NoticeSeen notice_loop(int step_ms) {
    NoticeSeen r;
    r.node = sky::instance_info().node;
    for (std::int64_t step = 0; step < 60000 / std::max(1, step_ms); ++step) {
        std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));
        sky::progress(step);
        auto p = sky::preemption();
        if (!p) continue;
        if (r.seen_at == 0) {
            r.seen_at = epoch_seconds(std::chrono::system_clock::now());
            r.checkpoint_step = p->checkpoint_step;
            r.deadline = epoch_seconds(p->deadline);
            r.instance_id = p->instance_id;
            r.reason = p->reason;
        }
        if (step >= p->checkpoint_step) {
            r.saved = step;
            return r;
        }
    }
    return r;
}

// Points the node's probe (the real spot_probe.sh) at a metadata endpoint on each test host: the
// endpoint's address is in a file of the host's own /tmp, which is also the script's marker (a
// host without it is not one of "ours").
struct MetadataOnHosts {
    std::string file = "/tmp/sky-test-imds-" + std::to_string(::getpid());
    std::vector<std::unique_ptr<FakeImds>> imds;
    std::vector<std::filesystem::path> written;
    MetadataOnHosts(const TestHosts& hosts) {
        for (int h = 0; h < hosts.size(); ++h) {
            imds.push_back(std::make_unique<FakeImds>(hosts, h));
            written.push_back(hosts.host_path(h, file));
            std::ofstream(written.back()) << imds.back()->endpoint() << "\n";
        }
        const std::string probe = "bash -c " +
                                  sky::detail::shell_quote(sky::detail::scripts::spot_probe_sh()) +
                                  " sky-spot-probe \"$(cat " + file + ")\" " + file;
        ::setenv("SKY_AWS_PREEMPTION_PROBE", probe.c_str(), 1);
    }
    ~MetadataOnHosts() {
        ::unsetenv("SKY_AWS_PREEMPTION_PROBE");
        std::error_code ec;
        for (const auto& p : written) std::filesystem::remove(p, ec);
    }
};

// The order of the notice, the reclaim and the replacement of `victim`.
std::vector<std::string> notice_order(Recorder& rec, const std::string& victim) {
    std::vector<std::string> order;
    std::lock_guard lk(rec.m);
    for (const auto& e : rec.events) {
        if (auto* p = std::get_if<sky::PreemptionNotice>(&e); p && p->instance_id == victim)
            order.push_back("notice");
        if (auto* p = std::get_if<sky::InstancePreempted>(&e); p && p->instance_id == victim)
            order.push_back("preempted");
    }
    return order;
}

}  // namespace aws_pool

TEST_CASE(
    "aws pool: a spot interruption in the instance metadata is a notice on every rank, then "
    "the node is preempted",
    "[aws_pool][preemption]") {
    SKIP_WITHOUT_HOSTS();
    Env env;
    TestHosts hosts(2);
    MetadataOnHosts metadata(hosts);
    FakeEc2 fake = make_fake(&hosts);
    Recorder rec;
    std::string victim;
    std::vector<NoticeSeen> seen;
    {
        sky::ComputePool pool{spec_for(fake, 2, rec)};
        REQUIRE(pool.instances().size() == 2);
        victim = pool.instances().at(1).id;
        const int h = fake.host_of(victim);
        REQUIRE(h >= 0);
        // Steps of 200 ms: longer than the progress report's lag and the notice's way to the
        // ranks, so no rank is past the agreed step when it reads the notice.
        auto ranks =
            std::async(std::launch::async, [&] { return sky::compute<notice_loop>(200) | pool; });
        // The ranks report steps first; then EC2 announces the reclaim, 10 s ahead.
        std::this_thread::sleep_for(std::chrono::seconds(2));
        const auto deadline = std::chrono::time_point_cast<std::chrono::seconds>(
            std::chrono::system_clock::now() + std::chrono::seconds(10));
        metadata.imds.at(static_cast<std::size_t>(h))->announce_interruption("terminate", deadline);
        REQUIRE(ranks.wait_for(std::chrono::seconds(40)) == std::future_status::ready);
        seen = ranks.get();
        REQUIRE(seen.size() == 2);
        for (const auto& r : seen) {
            INFO("rank " << r.node);
            CHECK(r.saved >= 0);
            CHECK(r.saved == r.checkpoint_step);
            CHECK(r.instance_id == victim);
            CHECK(r.deadline == Approx(epoch_seconds(deadline)).margin(0.001));
            CHECK(r.seen_at < r.deadline);
            CHECK(r.reason.find("instance-action: terminate") != std::string::npos);
        }
        CHECK(seen[0].checkpoint_step == seen[1].checkpoint_step);
        // At the deadline the node's launcher ends the worker: the node is preempted.
        REQUIRE(sky::test::wait_until([&] { return rec.count<sky::InstancePreempted>() >= 1; },
                                      std::chrono::seconds(30)));
        CHECK(std::chrono::system_clock::now() >= deadline);
        // Only the node EC2 warned; its metadata was read with a session token only.
        CHECK(metadata.imds.at(static_cast<std::size_t>(h))->tokens_issued() > 0);
        CHECK(metadata.imds.at(static_cast<std::size_t>(h))->authenticated_reads() > 0);
        for (const auto& m : metadata.imds) CHECK(m->refused_unauthenticated() == 0);
    }
    const auto notices = [&] {
        std::lock_guard lk(rec.m);
        std::vector<sky::PreemptionNotice> out;
        for (const auto& e : rec.events)
            if (auto* p = std::get_if<sky::PreemptionNotice>(&e)) out.push_back(*p);
        return out;
    }();
    REQUIRE(notices.size() == 1);
    CHECK(notices[0].node == 1);
    CHECK(notices[0].instance_id == victim);
    CHECK(notices[0].checkpoint_step == seen.at(0).checkpoint_step);
    CHECK(notices[0].checkpoint_step >= 1);  // the ranks had reported steps
    const auto order = notice_order(rec, victim);
    REQUIRE(order.size() >= 2);
    CHECK(order[0] == "notice");
    CHECK(order[1] == "preempted");
    CHECK(live_instances(fake) == 0);
    rec.check_no_secrets();
}

TEST_CASE("aws pool: a rebalance recommendation is an earlier notice, the interruption firms it",
          "[aws_pool][preemption]") {
    SKIP_WITHOUT_HOSTS();
    Env env;
    TestHosts hosts(1);
    MetadataOnHosts metadata(hosts);
    FakeEc2 fake = make_fake(&hosts);
    Recorder rec;
    {
        sky::ComputePool pool{spec_for(fake, 1, rec)};
        const std::string id = pool.instances().at(0).id;
        auto& imds = *metadata.imds.at(0);
        const auto recommended =
            std::chrono::time_point_cast<std::chrono::seconds>(std::chrono::system_clock::now());
        imds.announce_rebalance(recommended);
        REQUIRE(sky::test::wait_until([&] { return rec.count<sky::PreemptionNotice>() == 1; },
                                      std::chrono::seconds(20)));
        sky::PreemptionNotice first;
        {
            std::lock_guard lk(rec.m);
            for (const auto& e : rec.events)
                if (auto* p = std::get_if<sky::PreemptionNotice>(&e)) first = *p;
        }
        CHECK(first.instance_id == id);
        CHECK(first.checkpoint_step == -1);  // no call reports progress
        // Not before the earliest a reclaim could come: two minutes after the recommendation.
        CHECK(first.deadline == recommended + std::chrono::seconds(120));
        CHECK(first.reason.find("rebalance recommendation") != std::string::npos);
        // A recommendation ends nothing: the node still serves.
        std::this_thread::sleep_for(std::chrono::seconds(6));
        CHECK(rec.count<sky::InstancePreempted>() == 0);
        CHECK((sky::compute<node_index>() >> pool) == 0);
        // The interruption notice that follows is the firm one: the node goes at its time, with
        // no second event for the same machine.
        const auto at = std::chrono::time_point_cast<std::chrono::seconds>(
            std::chrono::system_clock::now() + std::chrono::seconds(5));
        imds.announce_interruption("terminate", at);
        REQUIRE(sky::test::wait_until([&] { return rec.count<sky::InstancePreempted>() == 1; },
                                      std::chrono::seconds(30)));
        CHECK(std::chrono::system_clock::now() >= at);
        CHECK(rec.count<sky::PreemptionNotice>() == 1);
    }
    CHECK(live_instances(fake) == 0);
}

TEST_CASE(
    "aws pool: the user-data host key is replaced on the node, IMDSv2, SSH from "
    "SKY_CLIENT_CIDR",
    "[aws_pool]") {
    SKIP_WITHOUT_HOSTS();
    Env env;
    sky::test::ScopedEnv scoped(
        std::vector<std::pair<std::string, std::string>>{{"SKY_CLIENT_CIDR", "198.51.100.7/32"}});
    TestHosts hosts(1);
    FakeEc2 fake = make_fake(&hosts);
    Recorder rec;
    {
        sky::ComputePool pool{spec_for(fake, 1, rec)};
        CHECK((sky::compute<node_index>() >> pool) == 0);
        const std::string id = pool.instances().at(0).id;
        const int h = fake.host_of(id);
        REQUIRE(h >= 0);
        // The key the user-data carried.
        const std::string ud = fake.user_data(id);
        const std::string open = "<<'SKY_HOST_PUB'\n";
        auto b = ud.find(open);
        REQUIRE(b != std::string::npos);
        b += open.size();
        const std::string ud_public = ud.substr(b, ud.find('\n', b) - b);
        const std::string ud_fingerprint = sky::detail::ssh::fingerprint_of_public_key(ud_public);
        // The node's sshd presents another key now: a connection pinned to the user-data key is
        // refused, and the pool (which never trusts on first use) reached it through its new pin.
        sky::detail::ssh::SessionOptions o;
        o.host = hosts.address(h);
        o.user = "root";
        o.private_key_file = hosts.client_key_path();
        o.host_key = sky::detail::ssh::HostKeyPin::public_key(ud_public);
        o.connect_attempts = 1;
        try {
            sky::detail::ssh::Session s(o);
            FAIL("the node still presents the key from its user-data");
        } catch (const sky::detail::ssh::HostKeyMismatch& e) {
            CHECK(e.actual() != ud_fingerprint);
            CHECK(e.actual().rfind("SHA256:", 0) == 0);
        }
        CHECK((sky::compute<node_index>() >> pool) == 0);  // still pinned and working
        CHECK_FALSE(said(rec, "not rotated"));
        // The user-data removes its own copy of the key once it has run.
        CHECK(ud.find("rm -f -- \"$0\"") != std::string::npos);

        // IMDSv2 only, one hop.
        auto launched = fake.instances();
        REQUIRE(launched.size() == 1);
        CHECK(launched[0]["MetadataOptions"]["HttpTokens"] == "required");
        CHECK(launched[0]["MetadataOptions"]["HttpPutResponseHopLimit"] == 1);
        CHECK(launched[0]["MetadataOptions"]["HttpEndpoint"] == "enabled");

        // Port 22 from the configured address only.
        auto groups = sky_groups(fake);
        REQUIRE(groups.size() == 1);
        const std::string rules = groups[0]["ipPermissions"].dump();
        INFO(rules);
        CHECK(rules.find("198.51.100.7/32") != std::string::npos);
        CHECK(rules.find("0.0.0.0/0") == std::string::npos);
        CHECK_FALSE(said(rec, "open to 0.0.0.0/0"));
    }
    CHECK(live_instances(fake) == 0);
    rec.check_no_secrets();
}

TEST_CASE("aws pool: a malformed SKY_CLIENT_CIDR or a plain-http remote endpoint is a ConfigError",
          "[aws_pool]") {
    Env env;
    sky::PoolSpec spec;
    spec.accelerator = "A100";
    spec.display = sky::Display::quiet;
    ::setenv("SKY_CLIENT_CIDR", "203.0.113.300/32", 1);
    spec.provider = sky::AWS{.endpoint = "http://127.0.0.1:1"};
    CHECK_THROWS_WITH(sky::ComputePool{spec}, Catch::Contains("SKY_CLIENT_CIDR"));
    ::unsetenv("SKY_CLIENT_CIDR");
    ::unsetenv("SKY_ALLOW_INSECURE_ENDPOINT");
    spec.provider = sky::AWS{.endpoint = "http://192.0.2.10:8080"};
    try {
        sky::ComputePool pool{spec};
        FAIL("a plain-http endpoint on another host was accepted");
    } catch (const sky::ConfigError& e) {
        const std::string what = e.what();
        CHECK(what.find("AWS{.endpoint}") != std::string::npos);
        CHECK(what.find("SKY_ALLOW_INSECURE_ENDPOINT") != std::string::npos);
        CHECK(what.find(kSecret) == std::string::npos);
    }
    ::setenv("AWS_ENDPOINT_URL_EC2", "http://192.0.2.10:8080", 1);
    auto r = sky::test::run_command({SKY_CLI_PATH, "ls", "--provider", "aws"});
    ::unsetenv("AWS_ENDPOINT_URL_EC2");
    CHECK(r.status == 1);
    CHECK(r.output.find("AWS_ENDPOINT_URL_EC2") != std::string::npos);
}

TEST_CASE("aws: a gzip bomb from the endpoint is a clear error with bounded memory", "[aws_ls]") {
    if (!std::filesystem::exists(model_path())) {
        WARN("skipped: no EC2 model at " << model_path() << " (SKY_TESTDATA_DIR)");
        return;
    }
    Env env;
    FakeEc2 fake = make_fake(nullptr);
    const std::size_t decoded = std::size_t{1} << 30;  // 1 GiB of zeros, ~6.5 MiB on the wire
    // The EC2 client itself: a typed error naming the limit, not retried.
    fake.inject_fault(Ec2Fault{
        .action = "DescribeInstances", .status = 200, .count = 1, .gzip_bomb_bytes = decoded});
    try {
        (void)ask(fake, "DescribeInstances");
        FAIL("the bomb was accepted");
    } catch (const sky::detail::HttpError& e) {
        CHECK(e.kind() == sky::detail::HttpError::Kind::body_too_large);
        CHECK(e.attempts() == 1);
        CHECK(std::string(e.what()).find("exceeds the limit") != std::string::npos);
    }
    // `sky ls`: fails with that error, and its peak memory stays far below the decoded size.
    fake.inject_fault(Ec2Fault{
        .action = "DescribeInstances", .status = 200, .count = 10, .gzip_bomb_bytes = decoded});
    ::setenv("AWS_ENDPOINT_URL_EC2", fake.endpoint().c_str(), 1);
    auto r = sky::test::run_command(
        {"/usr/bin/time", "-f", "sky-ls-max-rss-kib=%M", SKY_CLI_PATH, "ls", "--provider", "aws"},
        std::chrono::seconds(60));
    ::unsetenv("AWS_ENDPOINT_URL_EC2");
    INFO(r.output);
    CHECK(r.status == 1);
    CHECK(r.output.find("exceeds the limit of 67108864 bytes") != std::string::npos);
    auto at = r.output.find("sky-ls-max-rss-kib=");
    REQUIRE(at != std::string::npos);
    const long rss_kib = std::stol(r.output.substr(at + std::string("sky-ls-max-rss-kib=").size()));
    CHECK(rss_kib < 256 * 1024);
    CHECK(r.output.find(kSecret) == std::string::npos);
}

TEST_CASE(
    "aws: live offers win: a catalog type EC2 does not describe is never tried, an unsupported "
    "one moves on at once",
    "[aws_offers]") {
    if (!std::filesystem::exists(model_path()) || !std::filesystem::exists(instance_types_path())) {
        WARN("skipped: no EC2 model or instance types under SKY_TESTDATA_DIR");
        return;
    }
    Env env;
    // Provisioning only (no test hosts): which offers the pool asks EC2 for.
    auto provision = [](FakeEc2& fake, const char* accelerator, sky::Spot spot) {
        Recorder rec;
        auto spec = spec_for(fake, 1, rec);
        spec.accelerator = accelerator;
        spec.spot = spot;
        sky::test::EventLog log;
        auto b = sky::detail::descriptor_for(spec.provider)
                     .make_backend(sky::detail::BackendContext{spec, "0a1b2c3d", nullptr});
        b->provision(1, log.sink());
        REQUIRE(fake.instances().size() == 1);
        const std::string launched = fake.instances()[0]["InstanceType"];
        b->stop_all();
        CHECK(live_instances(fake) == 0);
        CHECK(sky_groups(fake).empty());
        return std::pair{launched, log.tried()};
    };
    SECTION("the test data's EC2 does not describe the p3 family: the catalog's V100s there") {
        auto v100 = sky::Catalog::embedded().select(
            {.accelerator = sky::Accelerator("V100"), .region = "us-east-1"}, "aws");
        REQUIRE(!v100.empty());
        REQUIRE(v100.front().instance_type == "p3.2xlarge");
        FakeEc2 fake = make_fake(nullptr);
        auto [launched, tried] = provision(fake, "V100", sky::Spot::Never{});
        CHECK(launched == "p3dn.24xlarge");
        CHECK(tried == std::vector<std::string>{"p3dn.24xlarge"});
    }
    SECTION("Unsupported: the next offer, without the same type on demand") {
        FakeEc2 fake = make_fake(nullptr);
        fake.inject_fault(
            Ec2Fault{.action = "RunInstances",
                     .status = 400,
                     .code = "Unsupported",
                     .message = "Your requested instance type is not supported in your requested "
                                "Availability Zone (us-east-1e).",
                     .count = 1});
        auto [launched, tried] = provision(fake, "A10G", sky::Spot::IfAvailable{});
        REQUIRE(tried.size() == 2);  // the cheapest spot offer once, then the next one
        CHECK(tried[0] != tried[1]);
        CHECK(launched == tried[1]);
    }
}

TEST_CASE(
    "aws: a security group held by a terminated instance's interface is deleted once it goes, "
    "one held longer is in the ledger, sky ls shows it and sky gc deletes it",
    "[aws_infra]") {
    if (!std::filesystem::exists(model_path())) {
        WARN("skipped: no EC2 model at " << model_path() << " (SKY_TESTDATA_DIR)");
        return;
    }
    Env env;
    sky::test::TempSkyHome home;
    // A pool's provisioning and teardown as PoolCore does them (no test hosts needed).
    auto run_pool = [](FakeEc2& fake, const std::string& pool_id) {
        Recorder rec;
        auto spec = spec_for(fake, 1, rec);
        spec.spot = sky::Spot::Never{};
        auto ledger = sky::detail::Ledger::open(pool_id, "aws", "");
        {
            auto b = sky::detail::descriptor_for(spec.provider)
                         .make_backend(sky::detail::BackendContext{spec, pool_id, ledger.get()});
            b->provision(1, [](sky::Event) {});
            REQUIRE(sky_groups(fake).size() == 1);
            b->stop_all();
        }
        ledger->close();
        CHECK(live_instances(fake) == 0);
        rec.check_no_secrets();
        return sky::detail::Ledger::read(ledger->file());
    };
    SECTION("the interface goes within the teardown's wait: nothing left") {
        FakeEc2 fake = make_fake(nullptr, true, {}, std::chrono::seconds(3));
        const auto started = std::chrono::steady_clock::now();
        auto rec = run_pool(fake, "1f2e3d4c");
        CHECK(std::chrono::steady_clock::now() - started >= std::chrono::seconds(3));
        CHECK(sky_groups(fake).empty());
        CHECK(sky_key_pairs(fake).empty());
        CHECK(rec.infra_left.empty());
    }
    SECTION("the interface outlives the teardown's wait: recorded, listed, collected later") {
        FakeEc2 fake = make_fake(nullptr, true, {}, std::chrono::seconds(8));
        sky::test::ScopedEnv wait(
            {{"SKY_AWS_INFRA_WAIT_S", "1"}, {"AWS_ENDPOINT_URL_EC2", fake.endpoint()}});
        const auto terminated = std::chrono::steady_clock::now();
        auto rec = run_pool(fake, "5a6b7c8d");
        REQUIRE(rec.infra_left.size() == 1);
        const std::string group = sky_groups(fake).at(0).value("groupId", "");
        CHECK(rec.infra_left[0].find("security group " + group + " (sky-5a6b7c8d)") !=
              std::string::npos);
        CHECK(rec.infra_left[0].find("DependencyViolation") != std::string::npos);
        CHECK(sky_key_pairs(fake).empty());  // the key pair went at once

        auto ls = sky::test::run_command({SKY_CLI_PATH, "ls"});
        INFO(ls.output);
        CHECK(ls.output.find("5a6b7c8d") != std::string::npos);
        CHECK(ls.output.find("INFRA LEFT") != std::string::npos);
        CHECK(ls.output.find("security group " + group) != std::string::npos);

        // After the interface has gone: gc deletes the group and records that nothing is left.
        std::this_thread::sleep_until(terminated + std::chrono::seconds(9));
        auto gc = sky::test::run_command({SKY_CLI_PATH, "gc", "--provider", "aws"},
                                         std::chrono::seconds(120));
        INFO(gc.output);
        CHECK(gc.status == 0);
        CHECK(sky_groups(fake).empty());
        CHECK(sky::detail::Ledger::read(rec.file).infra_left.empty());
        ls = sky::test::run_command({SKY_CLI_PATH, "ls"});
        CHECK(ls.output.find("5a6b7c8d") == std::string::npos);
    }
}

TEST_CASE("aws: the custom-endpoint and open-SSH notices are printed once, as notices",
          "[aws_notice]") {
    if (!std::filesystem::exists(model_path())) {
        WARN("skipped: no EC2 model at " << model_path() << " (SKY_TESTDATA_DIR)");
        return;
    }
    Env env;
    FakeEc2 fake = make_fake(nullptr);
    sky::test::ScopedEnv endpoint({{"AWS_ENDPOINT_URL_EC2", fake.endpoint()}});
    sky::test::TempSkyHome scratch;
    sky::detail::ssh_keygen(scratch.dir() / "key", "sky-test");
    const std::string public_key = sky::detail::public_key_of(scratch.dir() / "key");
    sky::test::EventLog log;
    sky::test::CapturedStderr err;
    for (const char* pool : {"0a0a0a0a", "0b0b0b0b"}) {  // two pools of one program
        auto a = sky::detail::find_provider("aws")->make_adapter("");
        (void)a->live_offers(sky::Catalog::embedded(),
                             {.accelerator = sky::Accelerator("A10G"), .region = "us-east-1"},
                             log.sink());
        a->create_infra({pool, std::string("sky-") + pool, public_key}, log.sink());
        a->delete_infra(pool);
    }
    const std::string text = err.text();
    INFO(text);
    CHECK(sky::test::occurrences(text,
                                 "sky: notice: AWS requests signed with your credentials go "
                                 "to " +
                                     fake.endpoint()) == 1);
    CHECK(sky::test::occurrences(text,
                                 "sky: notice: SSH (port 22) of this pool's instances is "
                                 "open to 0.0.0.0/0") == 1);
    CHECK(sky::test::occurrences(text, "sky: ") == 2);
    CHECK(log.all<sky::ErrorEvent>().empty());
    CHECK(sky_groups(fake).empty());
}

namespace aws_pool {

// Runs once per call: says so in the instance's own /tmp (one O_APPEND write), then sleeps.
int record_run(int id, int ms) {
    sky::test::append_run("/tmp/sky-aws-reconnect-runs", id);
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    return id;
}

std::vector<int> runs_here() { return sky::test::runs_in("/tmp/sky-aws-reconnect-runs"); }

}  // namespace aws_pool

TEST_CASE(
    "aws pool: a dropped SSH connection to an instance is resumed, not replaced: each result "
    "once, each function once",
    "[aws_pool][reconnect]") {
    SKIP_WITHOUT_HOSTS();
    Env env;
    TestHosts hosts(1);
    FakeEc2 fake = make_fake(&hosts);
    Recorder rec;
    {
        auto spec = spec_for(fake, 1, rec);
        spec.concurrency = 2;
        sky::ComputePool pool{spec};
        const std::string id = pool.instances().at(0).id;
        std::vector<sky::Future<int>> calls;
        for (int i = 0; i < 3; ++i) calls.push_back(pool.submit(sky::compute<record_run>(i, 3000)));
        std::this_thread::sleep_for(std::chrono::seconds(1));
        // As a NAT that forgot the connection: the client's SSH connection is reset.
        auto r = sky::test::run_command({"ss", "-K", "dst", hosts.address(0), "dport", "=",
                                         ":" + std::to_string(hosts.port(0))});
        INFO(r.output);
        REQUIRE(r.status == 0);
        for (int i = 0; i < 3; ++i) {
            REQUIRE(calls[static_cast<std::size_t>(i)].wait_for(std::chrono::seconds(60)));
            CHECK(calls[static_cast<std::size_t>(i)].get() == i);
        }
        std::map<int, int> runs;
        for (int run : sky::compute<runs_here>() >> pool) ++runs[run];
        CHECK(runs == std::map<int, int>{{0, 1}, {1, 1}, {2, 1}});
        CHECK(pool.instances().at(0).id == id);
        CHECK(said(rec, "reconnected to its worker"));
    }
    CHECK(rec.count<sky::InstanceReplaced>() == 0);
    CHECK(live_instances(fake) == 0);
    rec.check_no_secrets();
}
