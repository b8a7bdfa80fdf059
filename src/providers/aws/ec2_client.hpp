#pragma once
/// \file One EC2 call as the AWS adapter makes it: Query body, SigV4 signed on every attempt,
/// retried on throttling and 5xx, EC2's error code in the HttpError, secrets redacted.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "http/http_client.hpp"
#include "providers/aws/ec2_protocol.hpp"
#include "providers/aws/sigv4.hpp"
#include "providers/aws/xml.hpp"

namespace sky::detail::aws {

/// Credentials from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, else from the
/// shared credentials file (AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials; the section of
/// `profile`, else AWS_PROFILE, else "default"); nullopt when neither has them.
[[nodiscard]] std::optional<Credentials> load_default_credentials(const std::string& profile = {});

struct Ec2ClientConfig {
    std::string region = "us-east-1";
    /// Empty: https://ec2.<region>.amazonaws.com. A fake: http://127.0.0.1:<port>.
    std::string endpoint;
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
    [[nodiscard]] const std::string& region() const { return config_.region; }

private:
    Ec2ClientConfig config_;
    std::string endpoint_;
};

}  // namespace sky::detail::aws
