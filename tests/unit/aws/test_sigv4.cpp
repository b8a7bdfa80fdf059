// SigV4 against the AWS SigV4 test suite (botocore's copy, tests/data/aws-sigv4): one test case
// per test folder, found by walking the directory. Each checks the canonical request, the string to
// sign and the Authorization header, then verifies the signed request and a tampered copy.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "support/aws/sigv4_verify.hpp"
#include "unit/aws/dynamic_tests.hpp"
#include "util/digest.hpp"

using namespace sky::detail::aws;
namespace fs = std::filesystem;

namespace {

// The suite's fixed inputs (documented in the suite and used by every SDK's test).
const std::string kAccessKey = "AKIDEXAMPLE";
const std::string kSecretKey = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
const std::string kRegion = "us-east-1";
const std::string kService = "service";

std::string read_file(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
}

// Parses the suite's raw request format: request line, "Name:value" headers (continuation lines
// start with whitespace and fold into the previous value), blank line, body.
SignableRequest parse_raw_request(const std::string& raw) {
    SignableRequest request;
    std::istringstream in(raw);
    std::string line;
    std::getline(in, line);
    // The path may contain spaces ("GET /example space/ HTTP/1.1"): cut at the first space and
    // at the last " HTTP/".
    auto first_space = line.find(' ');
    auto version = line.rfind(" HTTP/");
    REQUIRE(first_space != std::string::npos);
    REQUIRE(version != std::string::npos);
    request.method = line.substr(0, first_space);
    request.target = line.substr(first_space + 1, version - first_space - 1);
    bool in_body = false;
    std::string body;
    while (std::getline(in, line)) {
        if (in_body) {
            body += (body.empty() ? "" : "\n") + line;
            continue;
        }
        if (line.empty()) {
            in_body = true;
            continue;
        }
        if ((line[0] == ' ' || line[0] == '\t') && !request.headers.empty()) {
            request.headers.back().second += "\n" + line;
            continue;
        }
        auto colon = line.find(':');
        REQUIRE(colon != std::string::npos);
        request.headers.emplace_back(line.substr(0, colon), line.substr(colon + 1));
    }
    request.body = body;
    return request;
}

std::optional<std::string> session_token_from(const std::string& creq) {
    std::smatch match;
    static const std::regex token("^x-amz-security-token:(.*)$", std::regex::multiline);
    if (std::regex_search(creq, match, token)) return match[1].str();
    return std::nullopt;
}

void run_case(const fs::path& dir) {
    const std::string name = dir.filename().string();
    const fs::path base = dir / name;
    const std::string expected_creq = read_file(base.string() + ".creq");
    const std::string expected_sts = read_file(base.string() + ".sts");
    const std::string expected_authz = read_file(base.string() + ".authz");
    SignableRequest request = parse_raw_request(read_file(base.string() + ".req"));

    // As in botocore's runner: the session token, when the case uses one, is the value in .creq.
    Credentials credentials{kAccessKey, kSecretKey, session_token_from(expected_creq).value_or("")};
    SigningParams params{kRegion, kService};
    SigningResult result = sign_request(request, credentials, params);
    CHECK(result.canonical_request == expected_creq);
    CHECK(result.string_to_sign == expected_sts);
    CHECK(result.authorization == expected_authz);

    // The verifier accepts the signed request...
    VerifyParams verify;
    verify.lookup = [&](const std::string& key) -> std::optional<Credentials> {
        if (key == kAccessKey) return credentials;
        return std::nullopt;
    };
    verify.service = kService;
    verify.region = kRegion;
    verify.now = std::chrono::system_clock::from_time_t(1440938160);  // 2015-08-30T12:36:00Z
    VerifyResult ok = verify_request(request, verify);
    INFO(ok.error_code << ": " << ok.message);
    CHECK(ok.ok);
    CHECK(ok.access_key_id == kAccessKey);

    // ...and rejects it with a changed body, a changed signed header or a wrong secret.
    SignableRequest tampered = request;
    tampered.body += "x";
    CHECK(verify_request(tampered, verify).error_code == "SignatureDoesNotMatch");
    tampered = request;
    for (auto& [key, value] : tampered.headers) {
        if (key == "Host" || key == "host") value = "evil.example.com";
    }
    CHECK(verify_request(tampered, verify).error_code == "SignatureDoesNotMatch");
    VerifyParams wrong_secret = verify;
    wrong_secret.lookup = [&](const std::string&) -> std::optional<Credentials> {
        return Credentials{kAccessKey, "not-the-secret", credentials.session_token};
    };
    CHECK(verify_request(request, wrong_secret).error_code == "SignatureDoesNotMatch");
}

// Finds every folder that holds <name>/<name>.req, at any depth (normalize-path/*,
// post-sts-token/*).
const bool registered = [] {
    const fs::path root = fs::path(SKY_TESTDATA_DIR) / "aws-sigv4";
    std::error_code ec;
    if (!fs::is_directory(root, ec)) {
        sky::test::register_test("sigv4: test suite", "[aws][sigv4]", [root] {
            WARN("SigV4 test suite not found at " << root.string() << "; skipping");
        });
        return true;
    }
    std::vector<fs::path> dirs;
    for (const auto& entry : fs::recursive_directory_iterator(root)) {
        if (!entry.is_directory()) continue;
        const auto name = entry.path().filename().string();
        if (fs::exists(entry.path() / (name + ".req"))) dirs.push_back(entry.path());
    }
    std::sort(dirs.begin(), dirs.end());
    for (const auto& dir : dirs) {
        const std::string id = fs::relative(dir, root).generic_string();
        sky::test::register_test("sigv4: " + id, "[aws][sigv4]", [dir] { run_case(dir); });
    }
    sky::test::register_test("sigv4: suite has cases", "[aws][sigv4]", [n = dirs.size()] {
        CHECK(n >= 25);  // a truncated copy of the suite must not pass silently
    });
    return true;
}();

}  // namespace

TEST_CASE("sigv4: signing sets X-Amz-Date, token and a verifiable Authorization", "[aws][sigv4]") {
    SignableRequest request{"POST",
                            "/",
                            {{"Host", "ec2.us-east-1.amazonaws.com"},
                             {"Content-Type", "application/x-www-form-urlencoded; charset=utf-8"},
                             {"User-Agent", "sky/test"}},
                            "Action=DescribeInstances&Version=2016-11-15"};
    Credentials credentials{"AKIDTEST", "secret/key+value", "session-token-value"};
    SigningParams params{"us-east-1", "ec2"};
    auto now = std::chrono::system_clock::from_time_t(1700000000);
    params.time = now;
    auto result = sign_request(request, credentials, params);
    CHECK(result.amz_date == "20231114T221320Z");
    CHECK(result.authorization.find("Credential=AKIDTEST/20231114/us-east-1/ec2/aws4_request") !=
          std::string::npos);
    CHECK(result.authorization.find(
              "SignedHeaders=content-type;host;x-amz-date;x-amz-security-token,") !=
          std::string::npos);  // User-Agent is not signed
    CHECK(result.canonical_request.find("secret/key+value") == std::string::npos);

    VerifyParams verify;
    verify.lookup = [&](const std::string& key) -> std::optional<Credentials> {
        if (key == "AKIDTEST") return credentials;
        return std::nullopt;
    };
    verify.service = "ec2";
    verify.region = "us-east-1";
    verify.now = now + std::chrono::minutes(3);
    CHECK(verify_request(request, verify).ok);

    // Unknown key, wrong region, expired, missing token, missing Authorization.
    VerifyParams unknown = verify;
    unknown.lookup = [](const std::string&) { return std::optional<Credentials>{}; };
    CHECK(verify_request(request, unknown).error_code == "AuthFailure");
    VerifyParams other_region = verify;
    other_region.region = "eu-west-1";
    CHECK(verify_request(request, other_region).error_code == "SignatureDoesNotMatch");
    VerifyParams later = verify;
    later.now = now + std::chrono::minutes(20);
    CHECK(verify_request(request, later).error_code == "AuthFailure");
    SignableRequest no_token = request;
    std::erase_if(no_token.headers,
                  [](const auto& h) { return h.first == "X-Amz-Security-Token"; });
    CHECK_FALSE(verify_request(no_token, verify).ok);
    SignableRequest unsigned_request = request;
    std::erase_if(unsigned_request.headers,
                  [](const auto& h) { return h.first == "Authorization"; });
    CHECK(verify_request(unsigned_request, verify).error_code == "MissingAuthenticationToken");

    SignableRequest no_host{"GET", "/", {}, ""};
    CHECK_THROWS_AS(sign_request(no_host, credentials, params), std::invalid_argument);
}

TEST_CASE("sigv4: known HMAC and SHA-256 vectors", "[aws][sigv4]") {
    CHECK(sky::detail::sha256_hex("") ==
          "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    // RFC 4231 test case 2.
    std::string mac = hmac_sha256("Jefe", "what do ya want for nothing?");
    std::string hex;
    for (unsigned char c : mac) hex += fmt::format("{:02x}", c);
    CHECK(hex == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}
