#pragma once
/// \file One EC2 call as the AWS adapter makes it: Query body, SigV4 signed on every attempt,
/// retried on throttling and 5xx, EC2's error code in the HttpError, secrets redacted.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "aws/ec2_protocol.hpp"
#include "aws/sigv4.hpp"
#include "aws/xml.hpp"
#include "http/http_client.hpp"

namespace sky::detail::aws {

/// Credentials from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, else from the
/// shared credentials file (AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials; the section of
/// `profile`, else AWS_PROFILE, else "default"); nullopt when neither has them.
[[nodiscard]] std::optional<Credentials> load_default_credentials(const std::string& profile = {});

/// An EC2 endpoint and where it came from.
struct EndpointChoice {
    std::string url;     ///< empty: AWS's own (https://ec2.<region>.amazonaws.com)
    std::string source;  ///< what set it ("AWS_ENDPOINT_URL_EC2", ...); empty for AWS's own
};

/// The endpoint override in force: `explicit_url` (named `explicit_source`) when given, else
/// AWS_ENDPOINT_URL_EC2, else AWS_ENDPOINT_URL, else none (AWS's own endpoint).
[[nodiscard]] EndpointChoice choose_endpoint(const std::string& explicit_url = {},
                                             const std::string& explicit_source = "AWS{.endpoint}");

/// Refuses an endpoint that would expose the credentials (ConfigError naming `source`): only
/// http:// and https:// URLs; plain http:// only to a loopback host (127.0.0.0/8, ::1,
/// localhost) unless SKY_ALLOW_INSECURE_ENDPOINT=1, since SigV4 headers (access key id, session
/// token) and every request body (user-data with host keys) would travel in clear text.
/// (http/endpoint.hpp's check with AWS's words.)
void check_endpoint(const std::string& url, const std::string& source);

struct Ec2ClientConfig {
    std::string region = "us-east-1";
    /// The Query service spoken: its signing name and API version ("sts", "2011-06-15" for STS,
    /// which shares EC2's Query protocol and error documents).
    std::string service = "ec2";
    std::string api_version = std::string(kEc2ApiVersion);
    /// Empty: https://<service>.<region>.amazonaws.com. A fake: http://127.0.0.1:<port>.
    std::string endpoint;
    /// What set `endpoint` (a variable's name), for the error that refuses it.
    std::string endpoint_source = "endpoint";
    Credentials credentials;
    /// Timeouts and retries; is_retryable, parse_error and prepare are set by the client.
    HttpOptions http = default_http_options();

    [[nodiscard]] static HttpOptions default_http_options();
};

class Ec2Client {
public:
    explicit Ec2Client(Ec2ClientConfig config);

    /// Sends one action and returns the response's root element (e.g. <RunInstancesResponse>).
    /// Throws HttpError: code() is EC2's error code (InvalidInstanceID.NotFound, ...).
    [[nodiscard]] XmlElement call(std::string_view action, const QueryParams& params = {}) const;
    /// call() converted with xml_to_json (EC2's camelCase element names, lists as arrays).
    [[nodiscard]] nlohmann::json call_json(std::string_view action,
                                           const QueryParams& params = {}) const;

    [[nodiscard]] const std::string& endpoint() const { return endpoint_; }
    /// True when requests (and so the credentials' signatures) go to an endpoint that is not
    /// AWS's default one for the region.
    [[nodiscard]] bool custom_endpoint() const { return !config_.endpoint.empty(); }
    /// The one-line notice about a custom endpoint ("" for AWS's own).
    [[nodiscard]] std::string endpoint_notice() const;
    [[nodiscard]] const std::string& region() const { return config_.region; }

private:
    Ec2ClientConfig config_;
    std::string endpoint_;
};

}  // namespace sky::detail::aws
