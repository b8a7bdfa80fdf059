#pragma once
/// \file AWS Signature Version 4: signing outgoing requests (the verifier the fake EC2 uses is in
/// tests/support/aws/sigv4_verify.hpp). Spec:
/// docs.aws.amazon.com/general/latest/gr/sigv4_signing.html.
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sky::detail::aws {

/// The algorithm name in the Authorization header and the string to sign.
inline constexpr std::string_view kSigV4Algorithm = "AWS4-HMAC-SHA256";

/// AWS credentials. Never logged; use the HTTP layer's secret lists when sending.
struct Credentials {
    std::string access_key_id;
    std::string secret_access_key;
    std::string session_token;  ///< empty unless temporary (STS) credentials
};

/// The parts of a request that SigV4 covers.
struct SignableRequest {
    std::string method;  ///< "GET", "POST", ...
    /// Path and query exactly as sent, e.g. "/" or "/a%20b?x=1&y=2" (the path may also be raw
    /// UTF-8; it is normalised and encoded for the canonical request).
    std::string target;
    /// Headers in the order given; names are case-insensitive; repeated names are allowed.
    std::vector<std::pair<std::string, std::string>> headers;
    std::string body;
};

struct SigningParams {
    std::string region;   ///< e.g. "us-east-1"
    std::string service;  ///< e.g. "ec2"
    /// Signing time; "now" when empty.
    std::optional<std::chrono::system_clock::time_point> time;
    /// Add X-Amz-Security-Token before signing (and so sign it) when credentials carry one.
    bool sign_session_token = true;
    /// Normalise the path ("/a/./b//c" -> "/a/b/c"); every service except S3.
    bool normalize_path = true;
};

/// The intermediate products, exposed for tests and debugging (none contains the secret key).
struct SigningResult {
    std::string canonical_request;
    std::string string_to_sign;
    std::string signature;  ///< lowercase hex
    std::string authorization;
    std::string amz_date;  ///< YYYYMMDDTHHMMSSZ
};

/// Signs in place: sets X-Amz-Date (if no X-Amz-Date or Date header is present), the session token
/// header when applicable, and Authorization. Every header present is signed except
/// Authorization, User-Agent, Expect and X-Amzn-Trace-Id (which proxies may rewrite).
SigningResult sign_request(SignableRequest& request, const Credentials& credentials,
                           const SigningParams& params);

/// The canonical request for the given signed header names (lowercase, as in SignedHeaders).
[[nodiscard]] std::string canonical_request(const SignableRequest& request,
                                            const std::vector<std::string>& signed_headers,
                                            bool normalize_path = true);

/// Raw HMAC-SHA256.
[[nodiscard]] std::string hmac_sha256(std::string_view key, std::string_view data);
/// The derived signing key kSigning for a date (YYYYMMDD), region and service.
[[nodiscard]] std::string signing_key(std::string_view secret, std::string_view date,
                                      std::string_view region, std::string_view service);
/// Formats a time as YYYYMMDDTHHMMSSZ.
[[nodiscard]] std::string amz_date(std::chrono::system_clock::time_point time);

/// A header's value as SigV4 signs it: every header of that name (case-insensitive) in order,
/// each with its whitespace trimmed and runs collapsed, joined with ','; nullopt when absent.
[[nodiscard]] std::optional<std::string> header_value(const SignableRequest& request,
                                                      std::string_view lower_name);

/// "AWS4-HMAC-SHA256\n<amz date>\n<scope>\n<hex SHA-256 of the canonical request>".
[[nodiscard]] std::string string_to_sign(std::string_view amz_date, std::string_view scope,
                                         std::string_view canonical_request);

}  // namespace sky::detail::aws
