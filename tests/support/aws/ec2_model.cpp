// The EC2 service model, botocore's serializer and parser rules, for tests and the fake EC2 only.
#include "support/aws/ec2_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <ctime>
#include <fstream>
#include <limits>

#include "sky/errors.hpp"
#include "util/encoding.hpp"
#include "util/random.hpp"
#include "util/text.hpp"

namespace sky::detail::aws {

using nlohmann::json;
using nlohmann::ordered_json;

// ----------------------------------------------------------------------------------------------
// Query bodies and error documents

QueryParams& set_json(QueryParams& params, const std::string& prefix, const json& value) {
    auto join = [&](const std::string& key) { return prefix.empty() ? key : prefix + "." + key; };
    switch (value.type()) {
        case json::value_t::null:
            break;
        case json::value_t::object:
            for (const auto& [key, child] : value.items()) set_json(params, join(key), child);
            break;
        case json::value_t::array:
            for (std::size_t i = 0; i < value.size(); ++i)
                set_json(params, join(std::to_string(i + 1)), value[i]);
            break;
        case json::value_t::boolean:
            params.set(prefix, value.get<bool>());
            break;
        case json::value_t::string:
            params.set(prefix, value.get<std::string>());
            break;
        case json::value_t::number_integer:
        case json::value_t::number_unsigned:
            params.set(prefix, value.dump());
            break;
        case json::value_t::number_float:
            params.set(prefix, fmt::format("{}", value.get<double>()));
            break;
        default:
            throw sky::ConfigError("EC2 query: cannot encode a binary value at " + prefix);
    }
    return params;
}

std::vector<std::pair<std::string, std::string>> parse_query_body(std::string_view body) {
    std::vector<std::pair<std::string, std::string>> out;
    auto decode = [](std::string_view text) {
        std::string plus(text);
        std::replace(plus.begin(), plus.end(), '+', ' ');
        return url_decode(plus);
    };
    while (!body.empty()) {
        auto amp = body.find('&');
        std::string_view pair = body.substr(0, amp);
        if (!pair.empty()) {
            auto eq = pair.find('=');
            out.emplace_back(decode(pair.substr(0, eq)),
                             eq == std::string_view::npos ? "" : decode(pair.substr(eq + 1)));
        }
        if (amp == std::string_view::npos) break;
        body.remove_prefix(amp + 1);
    }
    return out;
}

std::string make_ec2_error_xml(std::string_view code, std::string_view message,
                               std::string_view request_id) {
    return fmt::format(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>{}</Code>"
        "<Message>{}</Message></Error></Errors><RequestID>{}</RequestID></Response>",
        xml_escape(code), xml_escape(message), xml_escape(request_id));
}

// ----------------------------------------------------------------------------------------------
// ServiceModel

ServiceModel::ServiceModel(json model) : model_(std::move(model)) {
    if (!model_.contains("shapes")) model_["shapes"] = json::object();
    if (!model_.contains("operations")) model_["operations"] = json::object();
    if (!model_.contains("metadata")) model_["metadata"] = json::object();
}

ServiceModel ServiceModel::load(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw sky::Error("cannot open service model " + path);
    try {
        return ServiceModel(json::parse(in));
    } catch (const json::exception& e) {
        throw sky::Error("invalid service model " + path + ": " + e.what());
    }
}

ServiceModel ServiceModel::from_parts(json metadata, json shapes, json operations) {
    return ServiceModel(json{{"metadata", std::move(metadata)},
                             {"shapes", std::move(shapes)},
                             {"operations", std::move(operations)}});
}

const json& ServiceModel::shape(const std::string& name) const {
    const auto& shapes = model_.at("shapes");
    auto it = shapes.find(name);
    if (it == shapes.end()) throw sky::Error("service model has no shape " + name);
    return *it;
}

bool ServiceModel::has_shape(const std::string& name) const {
    return model_["shapes"].contains(name);
}

const json& ServiceModel::operation(const std::string& name) const {
    const auto& ops = model_.at("operations");
    auto it = ops.find(name);
    if (it == ops.end()) throw sky::Error("service model has no operation " + name);
    return *it;
}

bool ServiceModel::has_operation(const std::string& name) const {
    return model_["operations"].contains(name);
}

std::string ServiceModel::api_version() const {
    return model_["metadata"].value("apiVersion", std::string(kEc2ApiVersion));
}

// ----------------------------------------------------------------------------------------------
// Serialization

namespace {

std::string capitalize(std::string s) {
    if (!s.empty()) s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
    return s;
}

struct Serializer {
    const ServiceModel& model;
    const SerializeOptions& options;
    QueryParams& out;

    [[noreturn]] void bad(const std::string& where, const std::string& why) const {
        throw sky::ConfigError(fmt::format("EC2 request parameter {}: {}", where, why));
    }

    void value(const json& ref, const ordered_json& v, const std::string& prefix) {
        const json& shape = model.shape(ref.at("shape").get<std::string>());
        const std::string type = shape.at("type").get<std::string>();
        if (type == "structure") {
            structure(shape, v, prefix);
        } else if (type == "list") {
            if (!v.is_array()) bad(prefix, "expected a list");
            // EC2 flattens every list with 1-based indexes, whatever the member is called.
            for (std::size_t i = 0; i < v.size(); ++i) {
                value(shape.at("member"), v[i], fmt::format("{}.{}", prefix, i + 1));
            }
        } else if (type == "map") {
            if (!v.is_object()) bad(prefix, "expected a map");
            std::size_t i = 1;
            for (const auto& [key, item] : v.items()) {
                out.set(fmt::format("{}.{}.{}", prefix, i,
                                    shape.at("key").value("locationName", "Key")),
                        key);
                value(shape.at("value"), item,
                      fmt::format("{}.{}.{}", prefix, i,
                                  shape.at("value").value("locationName", "Value")));
                ++i;
            }
        } else if (type == "boolean") {
            if (!v.is_boolean()) bad(prefix, "expected a boolean");
            out.set(prefix, v.get<bool>());
        } else if (type == "integer" || type == "long") {
            if (!v.is_number_integer()) bad(prefix, "expected an integer");
            out.set(prefix, v.dump());
        } else if (type == "float" || type == "double") {
            if (v.is_string()) {  // NaN, Infinity, -Infinity
                out.set(prefix, v.get<std::string>());
            } else if (v.is_number()) {
                out.set(prefix,
                        v.is_number_float() ? fmt::format("{}", v.get<double>()) : v.dump());
            } else {
                bad(prefix, "expected a number");
            }
        } else if (type == "timestamp") {
            std::string format =
                ref.value("timestampFormat", shape.value("timestampFormat", "iso8601"));
            if (v.is_string()) {
                out.set(prefix, v.get<std::string>());
            } else if (v.is_number()) {
                double t = v.get<double>();
                if (format == "unixTimestamp") {
                    out.set(prefix, v.is_number_integer() ? v.dump() : fmt::format("{}", t));
                } else {
                    out.set(prefix, format_iso8601(t));
                }
            } else {
                bad(prefix, "expected a timestamp");
            }
        } else if (type == "blob") {
            if (!v.is_string()) bad(prefix, "expected a string (blob)");
            out.set(prefix, base64_encode(v.get<std::string>()));
        } else if (type == "string") {
            if (!v.is_string()) bad(prefix, "expected a string");
            out.set(prefix, v.get<std::string>());
        } else {
            bad(prefix, "unsupported shape type " + type);
        }
    }

    void structure(const json& shape, const ordered_json& v, const std::string& prefix) {
        if (!v.is_object()) bad(prefix.empty() ? "(input)" : prefix, "expected a structure");
        const json& members = shape.at("members");
        auto join = [&](const std::string& name) {
            return prefix.empty() ? name : prefix + "." + name;
        };
        for (const auto& [name, item] : v.items()) {
            auto it = members.find(name);
            if (it == members.end()) bad(join(name), "unknown parameter");
            // Host labels go into the host name and, as botocore does, into the body as well.
            value(*it, item, join(ec2_query_name(name, *it)));
        }
        for (const auto& [name, member] : members.items()) {
            if (member.value("idempotencyToken", false) && !v.contains(name)) {
                out.set(join(ec2_query_name(name, member)),
                        options.idempotency_token ? options.idempotency_token() : random_uuid());
            }
        }
    }
};

}  // namespace

std::string ec2_query_name(const std::string& member_name, const json& member) {
    if (auto it = member.find("queryName"); it != member.end()) return it->get<std::string>();
    if (auto it = member.find("locationName"); it != member.end())
        return capitalize(it->get<std::string>());
    return capitalize(member_name);
}

Ec2HttpRequest serialize_ec2_request(const ServiceModel& model, const std::string& operation,
                                     const ordered_json& params, const SerializeOptions& options) {
    const json& op = model.operation(operation);
    Ec2HttpRequest request;
    if (auto http = op.find("http"); http != op.end()) {
        request.method = http->value("method", "POST");
        request.request_uri = http->value("requestUri", "/");
    }
    QueryParams query;
    if (auto input = op.find("input"); input != op.end()) {
        Serializer{model, options, query}.structure(model.shape(input->at("shape")), params, "");
    } else if (!params.empty()) {
        throw sky::ConfigError("EC2 operation " + operation + " takes no parameters");
    }
    if (auto endpoint = op.find("endpoint"); endpoint != op.end()) {
        std::string prefix = endpoint->value("hostPrefix", "");
        for (std::size_t open = prefix.find('{'); open != std::string::npos;
             open = prefix.find('{')) {
            auto close = prefix.find('}', open);
            if (close == std::string::npos) break;
            std::string label = prefix.substr(open + 1, close - open - 1);
            if (!params.contains(label) || !params[label].is_string()) {
                throw sky::ConfigError("EC2 operation " + operation + ": host label " + label +
                                       " is required");
            }
            prefix.replace(open, close - open + 1, params[label].get<std::string>());
        }
        request.host_prefix = prefix;
    }
    request.body = ec2_query_body(operation, query, model.api_version());
    return request;
}

std::string ec2_request_url(std::string_view endpoint, const Ec2HttpRequest& request) {
    UrlParts parts = split_url(endpoint);
    std::string path = parts.path;
    while (!path.empty() && path.back() == '/') path.pop_back();
    std::string uri = request.request_uri.empty() ? "/" : request.request_uri;
    if (uri.front() != '/') uri.insert(uri.begin(), '/');
    return parts.scheme + request.host_prefix + parts.authority + path + uri;
}

// ----------------------------------------------------------------------------------------------
// Parsing

namespace {

json parse_scalar(const std::string& type, const XmlElement& element, const ParseOptions& options) {
    const std::string& text = element.text;
    try {
        if (type == "string") return text;
        if (type == "boolean") return text == "true";
        if (type == "integer" || type == "long") return std::stoll(text);
        if (type == "float" || type == "double") {
            if (text == "NaN") return std::numeric_limits<double>::quiet_NaN();
            if (text == "Infinity") return std::numeric_limits<double>::infinity();
            if (text == "-Infinity") return -std::numeric_limits<double>::infinity();
            return std::stod(text);
        }
        if (type == "timestamp") {
            if (!options.timestamps_as_epoch) return text;
            auto t = parse_timestamp(text);
            if (!t) throw XmlError("bad timestamp '" + text + "' in <" + element.name + ">");
            if (std::floor(*t) == *t) return static_cast<long long>(*t);
            return *t;
        }
        if (type == "blob") return base64_decode(text);
    } catch (const std::logic_error&) {  // stoll/stod: invalid or out of range
        throw XmlError("bad " + type + " value '" + text + "' in <" + element.name + ">");
    }
    throw XmlError("unsupported shape type " + type);
}

}  // namespace

json parse_shape(const ServiceModel& model, const json& ref, const XmlElement& element,
                 const ParseOptions& options) {
    const json& shape = model.shape(ref.at("shape").get<std::string>());
    const std::string type = shape.at("type").get<std::string>();
    if (type == "structure") {
        json object = json::object();
        for (const auto& [name, member] : shape.at("members").items()) {
            std::string location = member.value("location", "");
            if (!location.empty()) continue;  // headers and status codes are not in the body
            const json& member_shape = model.shape(member.at("shape").get<std::string>());
            const std::string xml_name = member.value("locationName", name);
            const bool flattened =
                member.value("flattened", false) || member_shape.value("flattened", false);
            if (member_shape.at("type") == "list" && flattened) {
                // A flattened list repeats the member's own element, one per item.
                json items = json::array();
                for (const auto& child : element.children) {
                    if (child.name == xml_name) {
                        items.push_back(
                            parse_shape(model, member_shape.at("member"), child, options));
                    }
                }
                if (!items.empty()) object[name] = std::move(items);
                continue;
            }
            if (const XmlElement* child = element.child(xml_name)) {
                object[name] = parse_shape(model, member, *child, options);
            }
        }
        return object;
    }
    if (type == "list") {
        const json& member = shape.at("member");
        const std::string item_name = member.value("locationName", "member");
        json items = json::array();
        for (const auto& child : element.children) {
            if (child.name == item_name)
                items.push_back(parse_shape(model, member, child, options));
        }
        return items;
    }
    if (type == "map") {
        const std::string key_name = shape.at("key").value("locationName", "key");
        const std::string value_name = shape.at("value").value("locationName", "value");
        json object = json::object();
        for (const auto& entry : element.children) {
            if (entry.name != "entry") continue;
            const XmlElement* key = entry.child(key_name);
            const XmlElement* value = entry.child(value_name);
            if (key && value)
                object[key->text] = parse_shape(model, shape.at("value"), *value, options);
        }
        return object;
    }
    return parse_scalar(type, element, options);
}

json parse_ec2_response(const ServiceModel& model, const std::string& operation,
                        std::string_view xml, const ParseOptions& options) {
    XmlElement root = parse_xml(xml);
    if (root.name == "Response" && root.child("Errors")) {
        throw XmlError("expected a " + operation + " response, got an error document");
    }
    const json& op = model.operation(operation);
    json result = json::object();
    if (auto output = op.find("output"); output != op.end()) {
        result = parse_shape(model, *output, root, options);
    }
    // EC2 writes requestId; be tolerant of RequestId.
    if (const XmlElement* id =
            root.child("requestId") ? root.child("requestId") : root.child("RequestId")) {
        result["ResponseMetadata"]["RequestId"] = id->text;
    }
    return result;
}

json parse_ec2_error_response(const ServiceModel* model, std::string_view xml,
                              const std::string& error_shape, const ParseOptions& options) {
    XmlElement root = parse_xml(xml);
    const XmlElement* error = nullptr;
    if (const XmlElement* errors = root.child("Errors")) error = errors->child("Error");
    if (!error) error = root.child("Error");
    if (!error) throw XmlError("not an EC2 error document (root <" + root.name + ">)");
    json result;
    json& out = result["Error"];
    out = json::object();
    if (model && !error_shape.empty()) {
        out = parse_shape(*model, json{{"shape", error_shape}}, *error, options);
    }
    out["Code"] = error->child_text("Code");
    if (error->child("Message")) out["Message"] = error->child_text("Message");
    if (const XmlElement* id =
            root.child("RequestID") ? root.child("RequestID") : root.child("RequestId")) {
        result["ResponseMetadata"]["RequestId"] = id->text;
    }
    return result;
}

// ----------------------------------------------------------------------------------------------
// Helpers

std::optional<double> parse_timestamp(std::string_view input) {
    std::string text(trim(input));
    if (text.empty()) return std::nullopt;
    // Epoch seconds, possibly fractional.
    if (std::all_of(text.begin(), text.end(), [](char c) {
            return std::isdigit(static_cast<unsigned char>(c)) || c == '.';
        })) {
        try {
            return std::stod(text);
        } catch (const std::logic_error&) {
            return std::nullopt;
        }
    }
    std::tm tm{};
    // RFC 822 / HTTP date: "Tue, 29 Apr 2014 18:30:38 GMT".
    if (const char* end = strptime(text.c_str(), "%a, %d %b %Y %H:%M:%S", &tm)) {
        std::string_view rest = end;
        if (rest == " GMT" || rest == " UTC" || rest == " +0000" || rest.empty()) {
            return static_cast<double>(timegm(&tm));
        }
        return std::nullopt;
    }
    tm = {};
    const char* end = strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
    if (!end) return std::nullopt;
    std::string_view rest = end;
    std::string fraction;
    if (!rest.empty() && rest.front() == '.') {
        std::size_t n = 1;
        while (n < rest.size() && std::isdigit(static_cast<unsigned char>(rest[n]))) ++n;
        fraction = std::string(rest.substr(0, n));
        rest.remove_prefix(n);
    }
    long offset = 0;
    if (rest == "Z" || rest.empty()) {
        offset = 0;
    } else if ((rest.front() == '+' || rest.front() == '-') &&
               (rest.size() == 6 || rest.size() == 5)) {
        std::string digits;
        for (char c : rest.substr(1)) {
            if (c != ':') digits.push_back(c);
        }
        if (digits.size() != 4 || !std::all_of(digits.begin(), digits.end(), ::isdigit))
            return std::nullopt;
        offset = (std::stol(digits.substr(0, 2)) * 3600 + std::stol(digits.substr(2, 2)) * 60) *
                 (rest.front() == '-' ? -1 : 1);
    } else {
        return std::nullopt;
    }
    long long seconds = static_cast<long long>(timegm(&tm)) - offset;
    // Parse "<seconds><fraction>" as one decimal so the result equals the literal's double.
    return std::stod(fmt::format("{}{}", seconds, fraction == "." ? "" : fraction));
}

std::string random_uuid() {
    std::array<std::byte, 16> bytes{};
    random_bytes(bytes);
    bytes[6] = (bytes[6] & std::byte{0x0F}) | std::byte{0x40};
    bytes[8] = (bytes[8] & std::byte{0x3F}) | std::byte{0x80};
    std::string hex;
    for (std::size_t i = 0; i < bytes.size(); ++i) {
        if (i == 4 || i == 6 || i == 8 || i == 10) hex.push_back('-');
        hex += fmt::format("{:02x}", static_cast<unsigned>(bytes[i]));
    }
    return hex;
}

}  // namespace sky::detail::aws
