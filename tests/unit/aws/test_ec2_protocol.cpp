// The EC2 Query protocol against botocore's protocol tests (tests/data/ec2-protocol: one test case
// per case id) and botocore's recorded EC2 XML responses (tests/data/ec2-xml-responses: one test
// case per fixture), plus the model-free helpers the adapter uses.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/aws/ec2_model.hpp"
#include "unit/aws/dynamic_tests.hpp"

using namespace sky::detail::aws;
using nlohmann::json;
using nlohmann::ordered_json;
namespace fs = std::filesystem;

namespace {

const fs::path kTestdata = SKY_TESTDATA_DIR;

std::string read_file(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
}

json to_json(const ordered_json& j) { return json::parse(j.dump()); }

// Compares parsed output with a protocol test's expectation: "NaN"/"Infinity"/"-Infinity" strings
// stand for those doubles, numbers compare by value.
bool matches(const json& expected, const json& actual, std::string& where) {
    if (expected.is_string() && actual.is_number_float()) {
        double v = actual.get<double>();
        const auto& s = expected.get_ref<const std::string&>();
        if (s == "NaN" && std::isnan(v)) return true;
        if (s == "Infinity" && std::isinf(v) && v > 0) return true;
        if (s == "-Infinity" && std::isinf(v) && v < 0) return true;
    }
    if (expected.is_number() && actual.is_number()) {
        double e = expected.get<double>();
        double a = actual.get<double>();
        if (e == a || std::fabs(e - a) <= 1e-9 * std::fabs(e)) return true;
        where += " (number)";
        return false;
    }
    if (expected.is_object() && actual.is_object()) {
        if (expected.size() != actual.size()) {
            where += " (keys differ)";
            return false;
        }
        for (const auto& [key, value] : expected.items()) {
            if (!actual.contains(key)) {
                where += "." + key + " (missing)";
                return false;
            }
            std::string sub = where + "." + key;
            if (!matches(value, actual[key], sub)) {
                where = sub;
                return false;
            }
        }
        return true;
    }
    if (expected.is_array() && actual.is_array()) {
        if (expected.size() != actual.size()) {
            where += " (length)";
            return false;
        }
        for (std::size_t i = 0; i < expected.size(); ++i) {
            std::string sub = where + "[" + std::to_string(i) + "]";
            if (!matches(expected[i], actual[i], sub)) {
                where = sub;
                return false;
            }
        }
        return true;
    }
    return expected == actual;
}

std::string media_type(const std::string& content_type) {
    return content_type.substr(0, content_type.find(';'));
}

void run_input_case(const ordered_json& suite, const ordered_json& test) {
    const ordered_json& given = test.at("given");
    if (given.contains("requestcompression")) {
        // botocore gzips these bodies; EC2's model has no operation with requestcompression
        // (checked in "ec2 model: no request compression"), so sky does not implement it.
        WARN("skipped: request compression (gzip) is not used by any EC2 operation");
        return;
    }
    const std::string name = given.at("name").get<std::string>();
    auto model = ServiceModel::from_parts(
        to_json(suite.at("metadata")), to_json(suite.at("shapes")), json{{name, to_json(given)}});
    SerializeOptions options;
    // botocore's runner fixes the generated token to this value.
    options.idempotency_token = [] { return std::string("00000000-0000-4000-8000-000000000000"); };
    Ec2HttpRequest request = serialize_ec2_request(model, name, test.at("params"), options);

    const ordered_json& expected = test.at("serialized");
    if (expected.contains("body")) CHECK(request.body == expected.at("body").get<std::string>());
    if (expected.contains("method"))
        CHECK(request.method == expected.at("method").get<std::string>());
    // botocore's runner uses https://example.com (plus the case's path, given in "host").
    std::string base_host = "example.com";
    std::string endpoint = "https://example.com";
    if (expected.contains("host") &&
        expected.at("host").get<std::string>().find('/') != std::string::npos) {
        endpoint = "https://" + expected.at("host").get<std::string>();
    }
    std::string url = ec2_request_url(endpoint, request);
    std::string after_scheme = url.substr(url.find("://") + 3);
    std::string host = after_scheme.substr(0, after_scheme.find('/'));
    std::string path = after_scheme.substr(after_scheme.find('/'));
    if (expected.contains("uri")) CHECK(path == expected.at("uri").get<std::string>());
    if (expected.contains("host")) {
        std::string want = expected.at("host").get<std::string>();
        CHECK(host == want.substr(0, want.find('/')));
    }
    if (expected.contains("headers") && expected.at("headers").contains("Content-Type")) {
        // botocore sends "...; charset=utf-8" and its runner compares the media type.
        CHECK(media_type(request.content_type) ==
              media_type(expected.at("headers").at("Content-Type").get<std::string>()));
    }
    // "requireHeaders": ["Content-Length"] is the transport's part: libcurl always sends it for a
    // POST body (see sky_test_http's POST case).
}

void run_output_case(const ordered_json& suite, const ordered_json& test) {
    const ordered_json& given = test.at("given");
    const std::string name = given.at("name").get<std::string>();
    auto model = ServiceModel::from_parts(
        to_json(suite.at("metadata")), to_json(suite.at("shapes")), json{{name, to_json(given)}});
    const std::string body = test.at("response").at("body").get<std::string>();
    ParseOptions options;
    options.timestamps_as_epoch = true;  // the suite states timestamps as epoch seconds

    if (test.contains("errorCode") && !test.at("errorCode").is_null()) {
        const std::string code = test.at("errorCode").get<std::string>();
        std::string error_shape;
        for (const auto& e : given.value("errors", ordered_json::array())) {
            if (e.at("shape").get<std::string>() == code) error_shape = code;
        }
        json parsed = parse_ec2_error_response(&model, body, error_shape, options);
        CHECK(parsed["Error"]["Code"] == code);
        if (test.contains("errorMessage") && !test.at("errorMessage").is_null()) {
            CHECK(parsed["Error"]["Message"] == test.at("errorMessage").get<std::string>());
        }
        const json expected_error = to_json(test.at("error"));
        for (const auto& [key, value] : expected_error.items()) {
            INFO("error member " << key << ": " << parsed["Error"].dump());
            CHECK(parsed["Error"][key] == value);
        }
        CHECK(parsed["ResponseMetadata"]["RequestId"] == "foo-id");
        return;
    }
    json parsed = parse_ec2_response(model, name, body, options);
    parsed.erase("ResponseMetadata");  // the suite's results leave it out
    json expected = to_json(test.at("result"));
    std::string where = "result";
    INFO("expected " << expected.dump() << "\n  actual " << parsed.dump());
    CHECK(matches(expected, parsed, where));
    INFO(where);
}

const ServiceModel& ec2_model() {
    static const ServiceModel model =
        ServiceModel::load((kTestdata / "ec2-model" / "service-2.json").string());
    return model;
}

void run_fixture(const fs::path& xml_path) {
    const std::string xml = read_file(xml_path);
    fs::path json_path = xml_path;
    json_path.replace_extension(".json");
    const json expected = json::parse(read_file(json_path));
    json parsed;
    if (xml_path.parent_path().filename() == "errors") {
        parsed = parse_ec2_error_response(&ec2_model(), xml);
    } else {
        // The operation is the root element's name less "Response" (RunInstancesResponse).
        std::string root = parse_xml(xml).name;
        REQUIRE(root.size() > 8);
        std::string operation = root.substr(0, root.size() - 8);
        REQUIRE(ec2_model().has_operation(operation));
        // botocore's fixtures keep timestamps as the text the service sent.
        parsed = parse_ec2_response(ec2_model(), operation, xml);
    }
    std::string where = "response";
    bool ok = matches(expected, parsed, where);
    INFO("first difference at " << where);
    if (!ok) {
        INFO("expected " << expected.dump().substr(0, 2000) << "\n  actual "
                         << parsed.dump().substr(0, 2000));
        CHECK(ok);
    } else {
        CHECK(ok);
    }
}

const bool registered = [] {
    std::error_code ec;
    const fs::path protocol = kTestdata / "ec2-protocol";
    if (!fs::is_directory(protocol, ec)) {
        sky::test::register_test("ec2 protocol: suite", "[aws][ec2]", [protocol] {
            WARN("EC2 protocol tests not found at " << protocol.string() << "; skipping");
        });
    } else {
        for (const auto& [file, kind] :
             {std::pair{"input-ec2.json", "input"}, std::pair{"output-ec2.json", "output"}}) {
            std::ifstream in(protocol / file);
            auto suites = std::make_shared<ordered_json>(ordered_json::parse(in));
            for (const auto& suite : *suites) {
                const std::string proto = suite.at("metadata").value("protocol", "");
                for (const auto& test : suite.at("cases")) {
                    std::string id = test.value("id", test.value("description", "?"));
                    std::string test_name = std::string("ec2 ") + kind + ": " + id;
                    bool input = std::string(kind) == "input";
                    sky::test::register_test(
                        test_name, "[aws][ec2][protocol]", [suites, &suite, &test, input, proto] {
                            if (proto != "ec2") {
                                WARN("skipped: protocol " << proto << " is not EC2's");
                                return;
                            }
                            if (input) {
                                run_input_case(suite, test);
                            } else {
                                run_output_case(suite, test);
                            }
                        });
                }
            }
        }
    }
    const fs::path fixtures = kTestdata / "ec2-xml-responses";
    if (!fs::is_directory(fixtures, ec) ||
        !fs::exists(kTestdata / "ec2-model" / "service-2.json")) {
        sky::test::register_test("ec2 fixture: all", "[aws][ec2]", [fixtures] {
            WARN("EC2 XML fixtures or model not found under " << fixtures.parent_path().string()
                                                              << "; skipping");
        });
    } else {
        std::vector<fs::path> files;
        for (const auto& entry : fs::recursive_directory_iterator(fixtures)) {
            if (entry.path().extension() == ".xml") files.push_back(entry.path());
        }
        std::sort(files.begin(), files.end());
        for (const auto& file : files) {
            sky::test::register_test(
                "ec2 fixture: " + fs::relative(file, fixtures).generic_string(),
                "[aws][ec2][fixtures]", [file] { run_fixture(file); });
        }
        sky::test::register_test("ec2 model: no request compression", "[aws][ec2]", [] {
            for (const auto& [name, op] : ec2_model().document().at("operations").items()) {
                INFO(name);
                CHECK_FALSE(op.contains("requestcompression"));
            }
        });
    }
    return true;
}();

}  // namespace

TEST_CASE("ec2: QueryParams flattens lists and structures with wire names", "[aws][ec2]") {
    QueryParams params;
    params.set("ImageId", "ami-123").set("MinCount", 1).set("MaxCount", 2).set("DryRun", false);
    params.set_list("SecurityGroupId", {"sg-1", "sg-2"});
    set_json(params, "TagSpecification",
             json::array({{{"ResourceType", "instance"},
                           {"Tag", json::array({{{"Key", "sky:pool"}, {"Value", "p 1/x"}}})}}}));
    set_json(params, "InstanceMarketOptions",
             {{"MarketType", "spot"}, {"SpotOptions", {{"MaxPrice", "0.5"}}}});
    std::string body = ec2_query_body("RunInstances", params);
    CHECK(
        body ==
        "Action=RunInstances&Version=2016-11-15&ImageId=ami-123&MinCount=1&MaxCount=2&DryRun=false"
        "&SecurityGroupId.1=sg-1&SecurityGroupId.2=sg-2&TagSpecification.1.ResourceType=instance"
        "&TagSpecification.1.Tag.1.Key=sky%3Apool&TagSpecification.1.Tag.1.Value=p%201%2Fx"
        "&InstanceMarketOptions.MarketType=spot&InstanceMarketOptions.SpotOptions.MaxPrice=0.5");
    auto decoded = parse_query_body(body);
    REQUIRE(decoded.size() == 13);
    CHECK(decoded[0] == std::pair<std::string, std::string>{"Action", "RunInstances"});
    CHECK(decoded[10].second == "p 1/x");
    CHECK(parse_query_body("a=b+c&d=%2B")[0].second == "b c");
    CHECK(parse_query_body("a=b+c&d=%2B")[1].second == "+");
}

TEST_CASE("ec2: the model serializer follows the real RunInstances shapes", "[aws][ec2]") {
    if (!fs::exists(kTestdata / "ec2-model" / "service-2.json")) {
        WARN("EC2 model not found; skipping");
        return;
    }
    ordered_json params = {
        {"ImageId", "ami-123"},
        {"MinCount", 1},
        {"MaxCount", 1},
        {"SecurityGroupIds", {"sg-1"}},
        {"UserData", "#!/bin/sh\necho hi\n"},
        {"TagSpecifications",
         {{{"ResourceType", "instance"}, {"Tags", {{{"Key", "k"}, {"Value", "v"}}}}}}},
        {"InstanceMarketOptions",
         {{"MarketType", "spot"}, {"SpotOptions", {{"SpotInstanceType", "one-time"}}}}},
        {"BlockDeviceMappings",
         {{{"DeviceName", "/dev/sda1"},
           {"Ebs", {{"VolumeSize", 100}, {"DeleteOnTermination", true}}}}}},
    };
    auto request = serialize_ec2_request(ec2_model(), "RunInstances", params);
    auto pairs = parse_query_body(request.body);
    std::map<std::string, std::string> by_name(pairs.begin(), pairs.end());
    CHECK(by_name["Action"] == "RunInstances");
    CHECK(by_name["Version"] == "2016-11-15");
    CHECK(by_name["SecurityGroupId.1"] == "sg-1");
    CHECK(by_name["TagSpecification.1.ResourceType"] == "instance");
    CHECK(by_name["TagSpecification.1.Tag.1.Key"] == "k");
    CHECK(by_name["InstanceMarketOptions.SpotOptions.SpotInstanceType"] == "one-time");
    CHECK(by_name["BlockDeviceMapping.1.Ebs.VolumeSize"] == "100");
    CHECK(by_name["BlockDeviceMapping.1.Ebs.DeleteOnTermination"] == "true");
    // RunInstances' ClientToken is an idempotency token: filled in when left out.
    CHECK(by_name["ClientToken"].size() == 36);
    // UserData's shape is a string in the model (botocore base64-encodes it in a handler), so it
    // goes as given: the adapter encodes it.
    CHECK(by_name["UserData"] == "#!/bin/sh\necho hi\n");

    CHECK_THROWS_AS(serialize_ec2_request(ec2_model(), "RunInstances", {{"NoSuchParam", 1}}),
                    sky::ConfigError);
    CHECK_THROWS_AS(serialize_ec2_request(ec2_model(), "RunInstances", {{"MinCount", "one"}}),
                    sky::ConfigError);
}

TEST_CASE("ec2: errors parse without a model, and the writer round-trips", "[aws][ec2]") {
    auto xml = make_ec2_error_xml("InvalidInstanceID.NotFound",
                                  "The instance ID 'i-1' <does not> exist", "req-1");
    auto info = parse_ec2_error(xml);
    REQUIRE(info);
    CHECK(info->code == "InvalidInstanceID.NotFound");
    CHECK(info->message == "The instance ID 'i-1' <does not> exist");
    CHECK(info->request_id == "req-1");
    CHECK_FALSE(parse_ec2_error("not xml"));
    CHECK_FALSE(parse_ec2_error("<DescribeInstancesResponse/>"));
    CHECK(is_ec2_retryable_code("RequestLimitExceeded"));
    CHECK(is_ec2_retryable_code("Throttling"));
    CHECK_FALSE(is_ec2_retryable_code("InsufficientInstanceCapacity"));
    CHECK_THROWS_AS(parse_xml("<a><b></a>"), XmlError);
}

TEST_CASE("ec2: schema-less XML to JSON for model-free callers", "[aws][ec2]") {
    auto root = parse_xml(R"(<?xml version="1.0"?>
<ns:DescribeInstancesResponse xmlns:ns="http://ec2.amazonaws.com/doc/2013-10-15/">
  <ns:requestId>r-1</ns:requestId>
  <ns:reservationSet><ns:item><ns:instancesSet><ns:item><ns:instanceId>i-1</ns:instanceId>
    <ns:instanceState><ns:code>16</ns:code><ns:name>running</ns:name></ns:instanceState>
    <ns:groupSet/><ns:tagSet><ns:item><ns:key>k</ns:key><ns:value>v &amp; w</ns:value></ns:item></ns:tagSet>
  </ns:item></ns:instancesSet></ns:item></ns:reservationSet>
</ns:DescribeInstancesResponse>)");
    CHECK(root.name == "DescribeInstancesResponse");
    json j = xml_to_json(root);
    CHECK(j["requestId"] == "r-1");
    const json& instance = j["reservationSet"][0]["instancesSet"][0];
    CHECK(instance["instanceId"] == "i-1");
    CHECK(instance["instanceState"]["code"] == "16");
    CHECK(instance["groupSet"] == json::array());
    CHECK(instance["tagSet"][0]["value"] == "v & w");
}

TEST_CASE("ec2: base64, timestamps, UUIDs, URLs", "[aws][ec2]") {
    for (const std::string& s : std::vector<std::string>{"", "f", "fo", "foo", "foob", "fooba",
                                                         "foobar", std::string("\0\xff\x10", 3)}) {
        CHECK(base64_decode(base64_encode(s)) == s);
    }
    CHECK(base64_encode("value") == "dmFsdWU=");
    CHECK_THROWS(base64_decode("dm!s"));
    CHECK(format_iso8601(1422172800) == "2015-01-25T08:00:00Z");
    CHECK(parse_timestamp("2015-01-25T08:00:00Z") == 1422172800.0);
    CHECK(parse_timestamp("2019-12-16T22:48:18-01:00") == 1576540098.0);
    CHECK(parse_timestamp("Tue, 29 Apr 2014 18:30:38 GMT") == 1398796238.0);
    CHECK(parse_timestamp("1398796238") == 1398796238.0);
    CHECK_FALSE(parse_timestamp("yesterday"));
    auto uuid = random_uuid();
    CHECK(uuid.size() == 36);
    CHECK(uuid[14] == '4');
    CHECK(uuid != random_uuid());
    Ec2HttpRequest request;
    CHECK(ec2_request_url("https://ec2.us-east-1.amazonaws.com", request) ==
          "https://ec2.us-east-1.amazonaws.com/");
    CHECK(ec2_request_url("http://127.0.0.1:8080/", request) == "http://127.0.0.1:8080/");
    CHECK(host_header_for_url("http://127.0.0.1:8080/") == "127.0.0.1:8080");
    CHECK(host_header_for_url("https://ec2.us-east-1.amazonaws.com:443/") ==
          "ec2.us-east-1.amazonaws.com");
    CHECK(host_header_for_url("https://ec2.eu-west-1.amazonaws.com") ==
          "ec2.eu-west-1.amazonaws.com");
}
