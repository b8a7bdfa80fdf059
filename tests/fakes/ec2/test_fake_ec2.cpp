// The fake EC2, driven by sky's own client (SigV4 signer + HTTP layer + EC2 protocol) and by a real
// AWS client (Debian's python3-boto3), which must accept every answer.
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>

#include <array>
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>

#include "aws/ec2_client.hpp"
#include "aws/sigv4.hpp"
#include "aws/sts.hpp"
#include "fakes/ec2/fake_ec2.hpp"
#include "http/http_client.hpp"
#include "support/aws/ec2_model.hpp"

using namespace sky::detail;
using namespace sky::detail::aws;
using namespace std::chrono_literals;
using sky::test::FakeEc2;
using sky::test::FakeEc2Options;

namespace {

const std::string kModel = std::string(SKY_TESTDATA_DIR) + "/ec2-model/service-2.json";
const std::string kInstanceTypes =
    std::string(SKY_TESTDATA_DIR) + "/ec2-instance-types/accelerated-instance-types.json";
const std::string kKey = "AKIDFAKEEC2EXAMPLE";
// Made up for the test; not a credential anywhere.
const std::string kSecret = "fakeSecretKey/For+The+FakeEc2Test0000000";

bool have_model() { return std::filesystem::exists(kModel); }

FakeEc2Options options() {
    FakeEc2Options o;
    o.access_key_id = kKey;
    o.secret_access_key = kSecret;
    o.region = "us-east-1";
    o.model_path = kModel;
    if (std::filesystem::exists(kInstanceTypes)) o.instance_types_path = kInstanceTypes;
    return o;
}

// The client the AWS adapter uses, pointed at the fake, with short backoffs.
Ec2Client client(const FakeEc2& fake, const std::string& secret = kSecret, int attempts = 1) {
    Ec2ClientConfig config;
    config.endpoint = fake.endpoint();
    config.region = "us-east-1";
    config.credentials = Credentials{kKey, secret, ""};
    config.http.retry.max_attempts = attempts;
    config.http.retry.initial_backoff = 5ms;
    config.http.retry.max_backoff = 20ms;
    config.http.attempt_timeout = 5000ms;
    return Ec2Client(config);
}

nlohmann::json parse_output(const ServiceModel& model, const std::string& action,
                            const XmlElement& root) {
    return parse_shape(model, model.operation(action).at("output"), root);
}

std::string error_code_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const HttpError& e) {
        return e.code();
    }
    return "";
}

}  // namespace

TEST_CASE("fake ec2: DescribeInstanceTypes answers by name, by filter and by page", "[fake][ec2]") {
    if (!have_model() || !std::filesystem::exists(kInstanceTypes)) {
        WARN("skipped: EC2 model or instance-types test data not found");
        return;
    }
    FakeEc2Options o = options();
    o.instance_type_overrides["p4d.24xlarge"] = {{"GpuInfo",
                                                  {{"Gpus",
                                                    {{{"Name", "A100"},
                                                      {"Manufacturer", "NVIDIA"},
                                                      {"Count", 4},
                                                      {"MemoryInfo", {{"SizeInMiB", 81920}}}}}},
                                                   {"TotalGpuMemoryInMiB", 327680}}}};
    FakeEc2 fake(o);
    auto ec2 = client(fake);

    QueryParams by_name;
    by_name.set_list("InstanceType", {"p4d.24xlarge", "g5.xlarge"});
    auto r = ec2.call_json("DescribeInstanceTypes", by_name);
    REQUIRE(r["instanceTypeSet"].is_array());
    REQUIRE(r["instanceTypeSet"].size() == 2);
    std::map<std::string, nlohmann::json> got;
    for (const auto& t : r["instanceTypeSet"]) got[t["instanceType"].get<std::string>()] = t;
    REQUIRE(got.count("p4d.24xlarge"));
    REQUIRE(got.count("g5.xlarge"));
    // The override replaced the GPU facts; the rest is the test data's.
    const auto& p4d = got["p4d.24xlarge"];
    CHECK(p4d["gpuInfo"]["gpus"][0]["count"] == "4");
    CHECK(p4d["gpuInfo"]["gpus"][0]["memoryInfo"]["sizeInMiB"] == "81920");
    CHECK(p4d["vCpuInfo"]["defaultVCpus"] == "96");
    CHECK(got["g5.xlarge"]["gpuInfo"]["gpus"][0]["name"] == "A10G");
    CHECK(got["g5.xlarge"]["supportedUsageClasses"].is_array());
    CHECK(r.value("nextToken", "") == "");

    // Paging: MaxResults per page, NextToken until none; every type once.
    std::set<std::string> seen;
    std::string token;
    int pages = 0;
    for (; pages < 50; ++pages) {
        QueryParams p;
        p.set("MaxResults", "7");
        if (!token.empty()) p.set("NextToken", token);
        auto page = ec2.call_json("DescribeInstanceTypes", p);
        const auto& items = page["instanceTypeSet"];
        CHECK(items.size() <= 7);
        for (const auto& t : items) CHECK(seen.insert(t["instanceType"].get<std::string>()).second);
        token = page.value("nextToken", "");
        if (token.empty()) break;
    }
    std::ifstream in(kInstanceTypes);
    const auto all = nlohmann::json::parse(in);
    CHECK(seen.size() == all.size());
    CHECK(pages + 1 == static_cast<int>((all.size() + 6) / 7));
    // No MaxResults: at most 100 in one page.
    auto whole = ec2.call_json("DescribeInstanceTypes");
    CHECK(whole["instanceTypeSet"].size() == std::min<std::size_t>(100, all.size()));

    QueryParams filtered;
    filtered.set("Filter.1.Name", "instance-type");
    filtered.set_list("Filter.1.Value", {"p4d*", "no-such.type"});
    auto f = ec2.call_json("DescribeInstanceTypes", filtered);
    REQUIRE(f["instanceTypeSet"].is_array());
    for (const auto& t : f["instanceTypeSet"])
        CHECK(t["instanceType"].get<std::string>().rfind("p4d", 0) == 0);
    CHECK(f["instanceTypeSet"].size() >= 1);

    QueryParams unknown;
    unknown.set_list("InstanceType", {"no-such.type"});
    CHECK(error_code_of([&] { (void)ec2.call_json("DescribeInstanceTypes", unknown); }) ==
          "InvalidInstanceType");
    QueryParams too_many;
    too_many.set("MaxResults", "101");
    CHECK(error_code_of([&] { (void)ec2.call_json("DescribeInstanceTypes", too_many); }) ==
          "InvalidParameterValue");
    QueryParams bad_token;
    bad_token.set("NextToken", "garbage");
    CHECK(error_code_of([&] { (void)ec2.call_json("DescribeInstanceTypes", bad_token); }) ==
          "InvalidParameterValue");
}

TEST_CASE("fake ec2: sky's signed client runs, describes and terminates", "[fake][ec2]") {
    if (!have_model()) {
        WARN("skipped: EC2 model not found at " << kModel);
        return;
    }
    FakeEc2 fake(options());
    auto model = ServiceModel::load(kModel);

    QueryParams run;
    run.set("ImageId", "ami-0ubuntu000000001").set("InstanceType", "t3.micro");
    run.set("MinCount", 1).set("MaxCount", 1).set("ClientToken", "token-1");
    run.set("UserData", base64_encode("#!/bin/sh\ntrue\n"));
    set_json(run, "TagSpecification",
             nlohmann::json::array(
                 {{{"ResourceType", "instance"},
                   {"Tag", nlohmann::json::array({{{"Key", "sky:pool"}, {"Value", "p9"}}})}}}));
    auto ec2 = client(fake);
    auto reservation = parse_output(model, "RunInstances", ec2.call("RunInstances", run));
    REQUIRE(reservation["Instances"].size() == 1);
    const std::string id = reservation["Instances"][0]["InstanceId"];
    CHECK(reservation["Instances"][0]["State"]["Name"] == "pending");
    CHECK(fake.user_data(id) == "#!/bin/sh\ntrue\n");

    // The same client token is the same launch.
    auto again = parse_output(model, "RunInstances", ec2.call("RunInstances", run));
    CHECK(again["Instances"][0]["InstanceId"] == id);
    CHECK(fake.instances().size() == 1);

    QueryParams describe;
    describe.set_list("InstanceId", {id});
    auto described = ec2.call_json("DescribeInstances", describe);
    const auto& instance = described["reservationSet"][0]["instancesSet"][0];
    CHECK(instance["instanceState"]["name"] == "running");
    CHECK(instance.contains("ipAddress"));
    CHECK(instance["tagSet"][0]["value"] == "p9");

    QueryParams terminate;
    terminate.set_list("InstanceId", {id});
    auto changes =
        parse_output(model, "TerminateInstances", ec2.call("TerminateInstances", terminate));
    CHECK(changes["TerminatingInstances"][0]["CurrentState"]["Code"] == 32);
    CHECK(changes["TerminatingInstances"][0]["PreviousState"]["Name"] == "running");
}

TEST_CASE("fake ec2: rejects what EC2 rejects, in EC2's error shape", "[fake][ec2]") {
    if (!have_model()) {
        WARN("skipped: EC2 model not found");
        return;
    }
    FakeEc2 fake(options());
    auto ec2 = client(fake);
    CHECK(error_code_of([&] { (void)client(fake, "wrong-secret").call("DescribeInstances"); }) ==
          "SignatureDoesNotMatch");
    CHECK(fake.auth_failures() == 1);
    QueryParams unknown;
    unknown.set("InstanceIds.1", "i-1");  // boto3's name, not the wire name
    CHECK(error_code_of([&] { (void)ec2.call("DescribeInstances", unknown); }) ==
          "UnknownParameter");
    CHECK(error_code_of([&] { (void)ec2.call("TerminateInstances"); }) == "MissingParameter");
    QueryParams missing_instance;
    missing_instance.set_list("InstanceId", {"i-0000000000000dead"});
    CHECK(error_code_of([&] { (void)ec2.call("DescribeInstances", missing_instance); }) ==
          "InvalidInstanceID.NotFound");
    QueryParams bad_count;
    bad_count.set("ImageId", "ami-0ubuntu000000001").set("MinCount", "one").set("MaxCount", 1);
    CHECK(error_code_of([&] { (void)ec2.call("RunInstances", bad_count); }) ==
          "InvalidParameterValue");
    QueryParams bad_image;
    bad_image.set("ImageId", "ami-nope").set("MinCount", 1).set("MaxCount", 1);
    CHECK(error_code_of([&] { (void)ec2.call("RunInstances", bad_image); }) ==
          "InvalidAMIID.NotFound");
    CHECK(error_code_of([&] { (void)ec2.call("NoSuchAction"); }) == "InvalidAction");

    // Unsigned, and signed with another API version.
    auto unsigned_reply = fake.handle("POST", "/", {{"Host", "127.0.0.1"}},
                                      "Action=DescribeInstances&Version=2016-11-15");
    CHECK(unsigned_reply.status == 401);
    CHECK(parse_ec2_error(unsigned_reply.body)->code == "MissingAuthenticationToken");
    SignableRequest old{
        "POST", "/", {{"Host", "127.0.0.1"}}, "Action=DescribeInstances&Version=2014-06-15"};
    sign_request(old, Credentials{kKey, kSecret, ""}, SigningParams{"us-east-1", "ec2"});
    CHECK(parse_ec2_error(fake.handle(old.method, old.target, old.headers, old.body).body)->code ==
          "NoSuchVersion");
}

TEST_CASE("fake ec2: injected throttling is retried by the HTTP layer", "[fake][ec2]") {
    if (!have_model()) {
        WARN("skipped: EC2 model not found");
        return;
    }
    // Everything the client logs (debug level) goes here, to be searched for the secret.
    std::ostringstream log_stream;
    auto previous_logger = spdlog::default_logger();
    auto logger = std::make_shared<spdlog::logger>(
        "capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(log_stream));
    logger->set_level(spdlog::level::trace);
    spdlog::set_default_logger(logger);
    struct Restore {
        std::shared_ptr<spdlog::logger> logger;
        ~Restore() { spdlog::set_default_logger(logger); }
    } restore{previous_logger};
    FakeEc2 fake(options());
    fake.inject_fault({.action = "DescribeSpotPriceHistory",
                       .status = 503,
                       .code = "RequestLimitExceeded",
                       .message = "Request limit exceeded.",
                       .count = 2});
    QueryParams params;
    params.set_list("InstanceType", {"g5.xlarge"}).set_list("ProductDescription", {"Linux/UNIX"});
    auto history = client(fake, kSecret, 3)
                       .call_json("DescribeSpotPriceHistory", params)["spotPriceHistorySet"];
    CHECK(history.size() == 3);
    CHECK(fake.request_count() == 3);

    fake.inject_fault({.action = "",
                       .status = 500,
                       .code = "InsufficientInstanceCapacity",
                       .message = "We currently do not have sufficient g5.xlarge capacity.",
                       .count = 1});
    try {
        (void)client(fake).call("DescribeSpotPriceHistory", params);
        FAIL("expected HttpError");
    } catch (const HttpError& e) {
        CHECK(e.code() == "InsufficientInstanceCapacity");
        CHECK(std::string(e.what()).find(kSecret) == std::string::npos);
    }
    const std::string logged = log_stream.str();
    CHECK(logged.find("retrying") != std::string::npos);
    CHECK(logged.find(kSecret) == std::string::npos);
    CHECK(logged.find("Signature=") == std::string::npos);
}

namespace {

// A Python that imports boto3 as the user running the test: the one CMake found (which may be
// another user's, e.g. a pyenv shim under root's home), else the system's (Debian's
// python3-boto3), else python3 on PATH.
std::optional<std::string> python_with_boto3() {
    for (const std::string python : {SKY_PYTHON3, "/usr/bin/python3", "python3"}) {
        if (python.empty()) continue;
        if (std::system(("'" + python + "' -c 'import boto3' >/dev/null 2>&1").c_str()) == 0)
            return "'" + python + "'";
    }
    return std::nullopt;
}

}  // namespace

TEST_CASE("fake ec2: boto3 accepts every answer", "[fake][ec2][boto3]") {
    if (!have_model()) {
        WARN("skipped: EC2 model not found");
        return;
    }
    const std::optional<std::string> python = python_with_boto3();
    if (!python) {
        WARN("skipped: no Python that can import boto3 (tried " SKY_PYTHON3
             ", /usr/bin/python3, python3 on PATH): install python3-boto3");
        return;
    }
    FakeEc2 fake(options());
    // One throttled answer first: botocore must retry it (the script checks RetryAttempts == 1).
    fake.inject_fault({.action = "DescribeSpotPriceHistory",
                       .status = 503,
                       .code = "RequestLimitExceeded",
                       .message = "Request limit exceeded.",
                       .count = 1});
    ::setenv("SKY_FAKE_EC2_ENDPOINT", fake.endpoint().c_str(), 1);
    ::setenv("SKY_FAKE_EC2_REGION", "us-east-1", 1);
    ::setenv("SKY_FAKE_EC2_KEY", kKey.c_str(), 1);
    ::setenv("SKY_FAKE_EC2_SECRET", kSecret.c_str(), 1);
    ::setenv("SKY_FAKE_EC2_INSTANCE_TYPES", options().instance_types_path.c_str(), 1);
    // Keep the user's AWS configuration out of it.
    ::setenv("AWS_CONFIG_FILE", "/dev/null", 1);
    ::setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null", 1);
    ::setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
    FILE* pipe = ::popen(("timeout 120 " + *python + " " SKY_BOTO3_SCRIPT " 2>&1").c_str(), "r");
    REQUIRE(pipe);
    std::string output;
    std::array<char, 4096> buffer{};
    while (std::fgets(buffer.data(), buffer.size(), pipe)) output += buffer.data();
    int status = ::pclose(pipe);
    ::unsetenv("SKY_FAKE_EC2_SECRET");
    CHECK(output.find(kSecret) == std::string::npos);
    INFO(output);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);

    auto ids_at = output.rfind("IDS ");
    REQUIRE(ids_at != std::string::npos);
    auto instances = fake.instances();
    REQUIRE(instances.size() == 2);
    for (const auto& instance : instances) {
        CHECK(output.find(instance["InstanceId"].get<std::string>(), ids_at) != std::string::npos);
        CHECK(instance["State"]["Name"] == "terminated");
        // botocore base64-encodes UserData; the fake decodes it back.
        CHECK(fake.user_data(instance["InstanceId"]) == "#!/bin/sh\necho hi\n");
    }
}

TEST_CASE("fake ec2: STS GetFederationToken, signed by sky's client, mints scoped credentials",
          "[fake][ec2][sts]") {
    if (!have_model()) {
        WARN("EC2 model not found; skipping");
        return;
    }
    FakeEc2 fake(options());
    ::setenv("AWS_ENDPOINT_URL_STS", fake.endpoint().c_str(), 1);
    const std::string policy =
        R"({"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:GetObject",)"
        R"("Resource":"arn:aws:s3:::b/*"}]})";
    const auto t = get_federation_token(
        Credentials{kKey, kSecret, ""},
        {.name = "sky-0123abcd", .policy = policy, .duration = std::chrono::seconds(7200)});
    CHECK(t.credentials.access_key_id.rfind("ASIA", 0) == 0);
    CHECK_FALSE(t.credentials.secret_access_key.empty());
    CHECK_FALSE(t.credentials.session_token.empty());
    CHECK_FALSE(t.expiration.empty());
    const auto requests = fake.federation_requests();
    REQUIRE(requests.size() == 1);
    CHECK(requests[0].caller == kKey);
    CHECK(requests[0].name == "sky-0123abcd");
    CHECK(requests[0].policy == policy);
    CHECK(requests[0].duration_seconds == 7200);
    CHECK(requests[0].issued.session_token == t.credentials.session_token);
    // STS's refusals arrive as HttpError with STS's code.
    CHECK(error_code_of([&] {
              (void)get_federation_token(Credentials{kKey, "not-the-secret", ""},
                                         {.name = "sky-x", .policy = policy});
          }) == "SignatureDoesNotMatch");
    CHECK(error_code_of([&] {
              (void)get_federation_token(Credentials{kKey, kSecret, ""},
                                         {.name = "sky-x", .policy = "{not json"});
          }) == "MalformedPolicyDocument");
    CHECK(error_code_of([&] {
              (void)get_federation_token(
                  Credentials{kKey, kSecret, ""},
                  {.name = "sky-x", .policy = policy, .duration = std::chrono::seconds(60)});
          }) == "ValidationError");
    ::unsetenv("AWS_ENDPOINT_URL_STS");
}
