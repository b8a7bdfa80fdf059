#pragma once
/// \file The EC2 Query protocol: request bodies (Action=...&Version=...&Name.1=...), responses
/// (XML to JSON) and errors (<Response><Errors><Error>...). Two levels: model-free helpers that
/// take wire names (what the adapter needs at run time), and a model-driven serializer/parser that
/// follows botocore's rules from a service-2.json (tests, the fake EC2, boto3-shaped JSON).
#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "providers/aws/xml.hpp"

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
    /// Adds a JSON value under prefix with EC2's flattening: objects as prefix.Key, arrays as
    /// prefix.N (1-based), booleans as true/false, null skipped. Keys are wire names.
    QueryParams& set_json(const std::string& prefix, const nlohmann::json& value);

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

/// Decodes an application/x-www-form-urlencoded body into ordered pairs ('+' is a space here, as
/// in HTML forms and botocore's encoder).
[[nodiscard]] std::vector<std::pair<std::string, std::string>> parse_query_body(
    std::string_view body);

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

/// EC2's error document, as the real service writes it.
[[nodiscard]] std::string make_ec2_error_xml(std::string_view code, std::string_view message,
                                             std::string_view request_id);

/// Whether an EC2 error code means "slow down or try again later" (RequestLimitExceeded,
/// Throttling, InternalError, Unavailable, ...). InsufficientInstanceCapacity is not: it needs
/// another offer, not the same call again.
[[nodiscard]] bool is_ec2_retryable_code(std::string_view code);

// ---------------------------------------------------------------------------------------------
// Model-driven serialization and parsing (botocore's EC2 rules).

/// A service model (botocore's service-2.json: metadata, operations, shapes).
class ServiceModel {
public:
    explicit ServiceModel(nlohmann::json model);
    /// Reads a service-2.json file. Throws sky::Error.
    static ServiceModel load(const std::string& path);
    /// Builds a model from a protocol-test suite entry ({metadata, shapes}) and one operation.
    static ServiceModel from_parts(nlohmann::json metadata, nlohmann::json shapes,
                                   nlohmann::json operations);

    [[nodiscard]] const nlohmann::json& shape(const std::string& name) const;
    [[nodiscard]] bool has_shape(const std::string& name) const;
    [[nodiscard]] const nlohmann::json& operation(const std::string& name) const;
    [[nodiscard]] bool has_operation(const std::string& name) const;
    [[nodiscard]] std::string api_version() const;
    [[nodiscard]] const nlohmann::json& document() const { return model_; }

private:
    nlohmann::json model_;
};

/// The wire name of a structure member in an EC2 request: queryName, else locationName with its
/// first letter capitalised, else the member name capitalised.
[[nodiscard]] std::string ec2_query_name(const std::string& member_name,
                                         const nlohmann::json& member);

struct SerializeOptions {
    /// Fills idempotency-token members the caller left out (a random UUID by default).
    std::function<std::string()> idempotency_token;
};

/// A serialized EC2 request.
struct Ec2HttpRequest {
    std::string method = "POST";
    std::string request_uri = "/";
    /// Host prefix from the operation's endpoint trait with labels filled in ("" when none).
    std::string host_prefix;
    std::string content_type = std::string(kQueryContentType);
    std::string body;
};

/// Serializes an operation's input (boto3-style member names) by the model, as botocore does.
/// Throws sky::ConfigError for an unknown member or a value of the wrong type.
[[nodiscard]] Ec2HttpRequest serialize_ec2_request(const ServiceModel& model,
                                                   const std::string& operation,
                                                   const nlohmann::ordered_json& params,
                                                   const SerializeOptions& options = {});

/// The URL to send a serialized request to: the endpoint ("https://ec2.us-east-1.amazonaws.com",
/// "http://127.0.0.1:8080/base") with the host prefix put in front of its host and the request URI
/// appended to its path.
[[nodiscard]] std::string ec2_request_url(std::string_view endpoint, const Ec2HttpRequest& request);

/// The Host header value for a URL (host, plus ":port" when one is given), as curl sends it and so
/// as SigV4 must sign it.
[[nodiscard]] std::string host_header_for_url(std::string_view url);

struct ParseOptions {
    /// Timestamps as epoch seconds (a number) instead of the text the service sent.
    bool timestamps_as_epoch = false;
};

/// Parses an operation's XML output into boto3-shaped JSON (member names, lists as arrays,
/// typed scalars), with ResponseMetadata.RequestId. Throws XmlError.
[[nodiscard]] nlohmann::json parse_ec2_response(const ServiceModel& model,
                                                const std::string& operation, std::string_view xml,
                                                const ParseOptions& options = {});

/// Parses one element by a shape (exposed for the fake server and tests).
[[nodiscard]] nlohmann::json parse_shape(const ServiceModel& model, const nlohmann::json& shape_ref,
                                         const XmlElement& element,
                                         const ParseOptions& options = {});

/// Parses an error document into {"Error": {"Code", "Message", modelled fields...},
/// "ResponseMetadata": {"RequestId"}}; error_shape may name a modelled error structure.
[[nodiscard]] nlohmann::json parse_ec2_error_response(const ServiceModel* model,
                                                      std::string_view xml,
                                                      const std::string& error_shape = {},
                                                      const ParseOptions& options = {});

// ---------------------------------------------------------------------------------------------
// Helpers shared by the serializer, the parser and the fake server.

[[nodiscard]] std::string base64_encode(std::string_view data);
/// Throws sky::Error on invalid input; ignores whitespace.
[[nodiscard]] std::string base64_decode(std::string_view text);
/// ISO 8601 UTC, "2015-01-25T08:00:00Z" (".123Z" when there is a fraction).
[[nodiscard]] std::string format_iso8601(double epoch_seconds);
/// Accepts ISO 8601 (fraction and Z or ±hh:mm offset optional), RFC 822 dates and epoch numbers.
[[nodiscard]] std::optional<double> parse_timestamp(std::string_view text);
/// A random (version 4) UUID.
[[nodiscard]] std::string random_uuid();

}  // namespace sky::detail::aws
