#pragma once
/// \file The model-driven half of the EC2 Query protocol, for tests and the fake EC2 only (libsky
/// keeps what the adapter sends: aws/ec2_protocol.hpp). A serializer and a parser that
/// follow botocore's rules from a service-2.json, so requests and answers can be checked against
/// the published model and boto3-shaped JSON.
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "aws/ec2_protocol.hpp"
#include "aws/xml.hpp"

namespace sky::detail::aws {

// ---------------------------------------------------------------------------------------------
// Query bodies and error documents.

/// Adds a JSON value under prefix with EC2's flattening: objects as prefix.Key, arrays as
/// prefix.N (1-based), booleans as true/false, null skipped. Keys are wire names.
QueryParams& set_json(QueryParams& params, const std::string& prefix, const nlohmann::json& value);

/// Decodes an application/x-www-form-urlencoded body into ordered pairs ('+' is a space here, as
/// in HTML forms and botocore's encoder).
[[nodiscard]] std::vector<std::pair<std::string, std::string>> parse_query_body(
    std::string_view body);

/// EC2's error document, as the real service writes it.
[[nodiscard]] std::string make_ec2_error_xml(std::string_view code, std::string_view message,
                                             std::string_view request_id);

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

/// Accepts ISO 8601 (fraction and Z or ±hh:mm offset optional), RFC 822 dates and epoch numbers.
[[nodiscard]] std::optional<double> parse_timestamp(std::string_view text);
/// A random (version 4) UUID.
[[nodiscard]] std::string random_uuid();

}  // namespace sky::detail::aws
