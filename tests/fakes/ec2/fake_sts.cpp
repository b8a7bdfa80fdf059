// The fake EC2's STS: GetFederationToken, as AWS's STS answers it (API 2011-06-15, the Query
// protocol): every request's SigV4 signature checked for service "sts" by the fake's one key,
// the parameters checked as STS checks them (Name 2-32 of [\w+=,.@-]; Policy JSON of at most
// 2048 characters; DurationSeconds 900-129600), errors in STS's <ErrorResponse> shape. Volumes
// (src/volumes) mint their nodes' credentials here in tests; boto3 checks the answers
// (boto3_client.py).
#include <fmt/format.h>

#include <chrono>
#include <ctime>
#include <regex>

#include "fakes/ec2/fake_ec2.hpp"
#include "support/aws/ec2_model.hpp"
#include "support/aws/sigv4_verify.hpp"
#include "util/random.hpp"

namespace sky::test {

namespace aws = sky::detail::aws;

namespace {

struct StsFailure {
    int status;
    std::string code, message;
};

[[noreturn]] void sts_fail(int status, std::string code, std::string message) {
    throw StsFailure{status, std::move(code), std::move(message)};
}

std::string xml_escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        switch (c) {
            case '&':
                out += "&amp;";
                break;
            case '<':
                out += "&lt;";
                break;
            case '>':
                out += "&gt;";
                break;
            case '"':
                out += "&quot;";
                break;
            default:
                out += c;
        }
    }
    return out;
}

std::string sts_error_xml(const StsFailure& f, const std::string& request_id) {
    return fmt::format(
        "<ErrorResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">\n"
        "  <Error>\n    <Type>Sender</Type>\n    <Code>{}</Code>\n    <Message>{}</Message>\n"
        "  </Error>\n  <RequestId>{}</RequestId>\n</ErrorResponse>\n",
        xml_escape(f.code), xml_escape(f.message), request_id);
}

std::string iso8601_in(std::chrono::seconds from_now) {
    const std::time_t t =
        std::chrono::system_clock::to_time_t(std::chrono::system_clock::now() + from_now);
    std::tm tm{};
    ::gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

std::string upper_alnum(std::size_t n) {
    static const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    std::string out;
    for (char c : sky::detail::random_hex(n)) out += alphabet[(c % 32 + 32) % 32];
    return out;
}

}  // namespace

bool is_sts_request(const std::vector<std::pair<std::string, std::string>>& headers) {
    for (const auto& [name, value] : headers) {
        std::string lower = name;
        for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (lower == "authorization" && value.find("/sts/aws4_request") != std::string::npos)
            return true;
    }
    return false;
}

std::vector<FederationTokenRequest> FakeEc2::federation_requests() const {
    std::lock_guard lock(mutex_);
    return federation_requests_;
}

Ec2Reply FakeEc2::handle_sts(const std::string& method, const std::string& target,
                             const std::vector<std::pair<std::string, std::string>>& headers,
                             const std::string& body) {
    const std::string request_id = aws::random_uuid();
    try {
        aws::SignableRequest signable{method, target, headers, body};
        aws::VerifyParams verify;
        verify.service = "sts";
        verify.region = options_.region;
        verify.lookup = [this](const std::string& key) -> std::optional<aws::Credentials> {
            if (key != options_.access_key_id) return std::nullopt;
            return aws::Credentials{options_.access_key_id, options_.secret_access_key, ""};
        };
        const aws::VerifyResult auth = aws::verify_request(signable, verify);
        if (!auth.ok) {
            ++auth_failures_;
            sts_fail(auth.error_code == "SignatureDoesNotMatch" ? 403 : 400, auth.error_code,
                     auth.message);
        }
        std::string query = method == "POST" ? body : "";
        if (method != "POST")
            if (auto q = target.find('?'); q != std::string::npos) query = target.substr(q + 1);
        std::string action, version, name, policy, duration;
        for (const auto& [k, v] : aws::parse_query_body(query)) {
            if (k == "Action")
                action = v;
            else if (k == "Version")
                version = v;
            else if (k == "Name")
                name = v;
            else if (k == "Policy")
                policy = v;
            else if (k == "DurationSeconds")
                duration = v;
            else if (k.rfind("PolicyArns.", 0) != 0 && k.rfind("Tags.", 0) != 0)
                sts_fail(400, "InvalidParameterValue", "Unknown parameter: " + k);
        }
        if (version != "2011-06-15")
            sts_fail(400, "InvalidAction",
                     "Could not find operation " + action + " for version " + version);
        if (action != "GetFederationToken")
            sts_fail(400, "InvalidAction", "Could not find operation " + action);
        // STS's own rules for the parameters.
        static const std::regex name_re(R"([\w+=,.@-]{2,32})");
        if (!std::regex_match(name, name_re))
            sts_fail(400, "ValidationError",
                     "1 validation error detected: Value at 'name' failed to satisfy constraint");
        long long seconds = 43200;
        if (!duration.empty()) {
            try {
                seconds = std::stoll(duration);
            } catch (const std::exception&) {
                sts_fail(400, "ValidationError", "Value at 'durationSeconds' is not a number");
            }
            if (seconds < 900 || seconds > 129600)
                sts_fail(400, "ValidationError",
                         "1 validation error detected: Value at 'durationSeconds' failed to "
                         "satisfy constraint: Member must have value between 900 and 129600");
        }
        if (policy.size() > 2048)
            sts_fail(400, "PackedPolicyTooLarge", "Packed policy consumes more than 100% of limit");
        if (!policy.empty()) {
            try {
                const auto doc = nlohmann::json::parse(policy);
                if (!doc.is_object() || !doc.contains("Statement"))
                    sts_fail(400, "MalformedPolicyDocument", "Policy has no Statement");
            } catch (const nlohmann::json::exception&) {
                sts_fail(400, "MalformedPolicyDocument", "Syntax errors in policy.");
            }
        }
        aws::Credentials issued = options_.sts_issued;
        if (issued.access_key_id.empty())
            issued = {"ASIA" + upper_alnum(16), sky::detail::random_hex(40),
                      "FwoGZXIvYXdzE" + sky::detail::random_hex(96)};
        {
            std::lock_guard lock(mutex_);
            federation_requests_.push_back(
                {auth.access_key_id.empty() ? options_.access_key_id : auth.access_key_id, name,
                 policy, seconds, issued});
        }
        return Ec2Reply{
            200,
            fmt::format(
                "<GetFederationTokenResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">\n"
                "  <GetFederationTokenResult>\n"
                "    <Credentials>\n"
                "      <SessionToken>{token}</SessionToken>\n"
                "      <SecretAccessKey>{secret}</SecretAccessKey>\n"
                "      <Expiration>{expires}</Expiration>\n"
                "      <AccessKeyId>{key}</AccessKeyId>\n"
                "    </Credentials>\n"
                "    <FederatedUser>\n"
                "      <Arn>arn:aws:sts::123456789012:federated-user/{name}</Arn>\n"
                "      <FederatedUserId>123456789012:{name}</FederatedUserId>\n"
                "    </FederatedUser>\n"
                "    <PackedPolicySize>{packed}</PackedPolicySize>\n"
                "  </GetFederationTokenResult>\n"
                "  <ResponseMetadata>\n    <RequestId>{id}</RequestId>\n  </ResponseMetadata>\n"
                "</GetFederationTokenResponse>\n",
                fmt::arg("token", xml_escape(issued.session_token)),
                fmt::arg("secret", xml_escape(issued.secret_access_key)),
                fmt::arg("expires", iso8601_in(std::chrono::seconds(seconds))),
                fmt::arg("key", xml_escape(issued.access_key_id)),
                fmt::arg("name", xml_escape(name)), fmt::arg("packed", policy.size() * 100 / 2048),
                fmt::arg("id", request_id))};
    } catch (const StsFailure& f) {
        return Ec2Reply{f.status, sts_error_xml(f, request_id)};
    }
}

}  // namespace sky::test
