#pragma once
/// \file AWS Signature Version 4: signing outgoing requests and verifying received ones (the
/// fake EC2 uses the verifier). Spec: docs.aws.amazon.com/general/latest/gr/sigv4_signing.html.
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sky::detail::aws {

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

/// Lowercase hex SHA-256.
[[nodiscard]] std::string sha256_hex(std::string_view data);
/// Raw HMAC-SHA256.
[[nodiscard]] std::string hmac_sha256(std::string_view key, std::string_view data);
/// The derived signing key kSigning for a date (YYYYMMDD), region and service.
[[nodiscard]] std::string signing_key(std::string_view secret, std::string_view date,
                                      std::string_view region, std::string_view service);
/// Formats a time as YYYYMMDDTHHMMSSZ.
[[nodiscard]] std::string amz_date(std::chrono::system_clock::time_point time);

/// The outcome of checking a received request's signature.
struct VerifyResult {
    bool ok = false;
    /// EC2's error code when not ok: "AuthFailure" (unknown key, malformed or expired
    /// credential scope), "SignatureDoesNotMatch", "IncompleteSignature" or
    /// "MissingAuthenticationToken".
    std::string error_code;
    std::string message;  ///< safe to return to the client: no secret in it
    std::string access_key_id;
    std::string region;
    std::string service;
};

struct VerifyParams {
    /// Finds the secret (and session token, if any) for an access key id; nullopt = unknown key.
    std::function<std::optional<Credentials>(const std::string& access_key_id)> lookup;
    /// Expected service ("ec2"); empty accepts any.
    std::string service;
    /// Expected region; empty accepts any.
    std::string region;
    /// Current time for the clock-skew check; "now" when empty.
    std::optional<std::chrono::system_clock::time_point> now;
    /// AWS rejects requests more than 15 minutes off (RequestExpired / SignatureDoesNotMatch).
    std::chrono::seconds max_skew{15 * 60};
    bool normalize_path = true;
};

/// Recomputes the signature of a received request (headers as received, Authorization included)
/// and compares it in constant time.
[[nodiscard]] VerifyResult verify_request(const SignableRequest& request,
                                          const VerifyParams& params);

}  // namespace sky::detail::aws
