#pragma once
/// \file AWS STS as sky uses it: GetFederationToken, which turns the caller's long-term keys into
/// temporary credentials whose permissions are the caller's narrowed to a session policy. Volumes
/// (src/volumes) hand nodes such credentials instead of the keys that launch instances.
#include <chrono>
#include <string>

#include "aws/sigv4.hpp"

namespace sky::detail::aws {

/// The STS API version sky speaks.
inline constexpr std::string_view kStsApiVersion = "2011-06-15";

/// Temporary credentials and when they end.
struct TemporaryCredentials {
    Credentials credentials;  ///< with a session token
    std::string expiration;   ///< ISO 8601, as STS wrote it
};

/// What GetFederationToken is asked for.
struct FederationRequest {
    /// The federated user's name: 2 to 32 characters of [A-Za-z0-9+=,.@_-].
    std::string name;
    /// An IAM policy document (JSON, at most 2048 characters once packed): the session may do only
    /// what both it and the caller's own policies allow.
    std::string policy;
    /// 900 to 129600 seconds (STS refuses more for an IAM user's keys, and 3600 for root's).
    std::chrono::seconds duration{3600};
};

/// The STS endpoint override in force: AWS_ENDPOINT_URL_STS, else AWS_ENDPOINT_URL, else none
/// (AWS's own, https://sts.<region>.amazonaws.com).
[[nodiscard]] std::string sts_endpoint_override(std::string* source = nullptr);

/// Calls GetFederationToken with `caller` (long-term keys: STS refuses temporary ones) in
/// `region`. Throws HttpError (STS's error code in code()), or ConfigError for an endpoint that
/// would expose the credentials.
[[nodiscard]] TemporaryCredentials get_federation_token(const Credentials& caller,
                                                        const FederationRequest& request,
                                                        const std::string& region = "us-east-1");

}  // namespace sky::detail::aws
