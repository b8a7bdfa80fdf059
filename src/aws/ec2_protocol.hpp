#pragma once
/// \file The EC2 Query protocol as the adapter speaks it: request bodies
/// (Action=...&Version=...&Name.1=...) built from wire names, and error documents
/// (<Response><Errors><Error>...). The model-driven serializer and parser that follow botocore's
/// rules from a service-2.json serve only tests and the fake EC2: tests/support/aws/ec2_model.hpp.
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "aws/xml.hpp"
#include "util/encoding.hpp"

namespace sky::detail::aws {

/// The EC2 API version sky speaks.
inline constexpr std::string_view kEc2ApiVersion = "2016-11-15";
/// Content type of an EC2 Query request body.
inline constexpr std::string_view kQueryContentType =
    "application/x-www-form-urlencoded; charset=utf-8";

// ---------------------------------------------------------------------------------------------
// Model-free request building: parameter names are the wire names.

/// An ordered list of Query parameters.
class QueryParams {
public:
    QueryParams& set(std::string name, std::string value);
    QueryParams& set(std::string name, const char* value) {
        return set(std::move(name), std::string(value));
    }
    QueryParams& set(std::string name, bool value);
    QueryParams& set(std::string name, long long value);
    QueryParams& set(std::string name, int value) {
        return set(std::move(name), static_cast<long long>(value));
    }
    /// prefix.1=values[0], prefix.2=values[1], ... (nothing for an empty list).
    QueryParams& set_list(const std::string& prefix, const std::vector<std::string>& values);

    [[nodiscard]] const std::vector<std::pair<std::string, std::string>>& entries() const {
        return entries_;
    }
    [[nodiscard]] std::optional<std::string> get(std::string_view name) const;
    /// name=value pairs joined with '&', percent-encoded (RFC 3986 unreserved kept).
    [[nodiscard]] std::string encode() const;

private:
    std::vector<std::pair<std::string, std::string>> entries_;
};

/// The body of an EC2 request: Action and Version first, then the parameters.
[[nodiscard]] std::string ec2_query_body(std::string_view action, const QueryParams& params,
                                         std::string_view version = kEc2ApiVersion);

// ---------------------------------------------------------------------------------------------
// Errors.

/// An EC2 error response: <Response><Errors><Error><Code/><Message/></Error></Errors><RequestID/>.
struct Ec2ErrorInfo {
    std::string code;
    std::string message;
    std::string request_id;
};

/// The first error of an EC2 error document; nullopt when the body is not one.
[[nodiscard]] std::optional<Ec2ErrorInfo> parse_ec2_error(std::string_view body);

/// Whether an EC2 error code means "slow down or try again later" (RequestLimitExceeded,
/// Throttling, InternalError, Unavailable, ...). InsufficientInstanceCapacity is not: it needs
/// another offer, not the same call again.
[[nodiscard]] bool is_ec2_retryable_code(std::string_view code);

// ---------------------------------------------------------------------------------------------
// URLs and times.

/// A URL cut into "scheme://", authority ("user@host:port") and the rest (path, query, fragment).
struct UrlParts {
    std::string scheme;
    std::string authority;
    std::string path;
};
[[nodiscard]] UrlParts split_url(std::string_view url);

/// The Host header value for a URL (host, plus ":port" when one is given), as curl sends it and so
/// as SigV4 must sign it.
[[nodiscard]] std::string host_header_for_url(std::string_view url);

/// ISO 8601 UTC, "2015-01-25T08:00:00Z" (".123Z" when there is a fraction).
[[nodiscard]] std::string format_iso8601(double epoch_seconds);

// aws::base64_encode (UserData, key material) and aws::base64_decode name the one implementation
// in util/encoding.hpp.
using sky::detail::base64_decode;
using sky::detail::base64_encode;

}  // namespace sky::detail::aws
