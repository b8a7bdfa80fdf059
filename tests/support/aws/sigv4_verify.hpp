#pragma once
/// \file Verifying received SigV4 requests, for the fake EC2 and tests only (libsky signs:
/// aws/sigv4.hpp).
#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "aws/sigv4.hpp"

namespace sky::detail::aws {

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
