#include "aws/ec2_protocol.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <ctime>

namespace sky::detail::aws {

// ----------------------------------------------------------------------------------------------
// QueryParams

QueryParams& QueryParams::set(std::string name, std::string value) {
    entries_.emplace_back(std::move(name), std::move(value));
    return *this;
}

QueryParams& QueryParams::set(std::string name, bool value) {
    return set(std::move(name), std::string(value ? "true" : "false"));
}

QueryParams& QueryParams::set(std::string name, long long value) {
    return set(std::move(name), std::to_string(value));
}

QueryParams& QueryParams::set_list(const std::string& prefix,
                                   const std::vector<std::string>& values) {
    for (std::size_t i = 0; i < values.size(); ++i) {
        set(fmt::format("{}.{}", prefix, i + 1), values[i]);
    }
    return *this;
}

std::optional<std::string> QueryParams::get(std::string_view name) const {
    for (const auto& [key, value] : entries_) {
        if (key == name) return value;
    }
    return std::nullopt;
}

std::string QueryParams::encode() const {
    std::string out;
    for (const auto& [key, value] : entries_) {
        if (!out.empty()) out.push_back('&');
        out += url_encode(key) + "=" + url_encode(value);
    }
    return out;
}

std::string ec2_query_body(std::string_view action, const QueryParams& params,
                           std::string_view version) {
    std::string body = fmt::format("Action={}&Version={}", url_encode(action), url_encode(version));
    std::string rest = params.encode();
    if (!rest.empty()) body += "&" + rest;
    return body;
}

// ----------------------------------------------------------------------------------------------
// Errors

std::optional<Ec2ErrorInfo> parse_ec2_error(std::string_view body) {
    XmlElement root;
    try {
        root = parse_xml(body);
    } catch (const XmlError&) {
        return std::nullopt;
    }
    // EC2: <Response><Errors><Error>; other Query services: <ErrorResponse><Error>.
    const XmlElement* error = nullptr;
    if (const XmlElement* errors = root.child("Errors")) error = errors->child("Error");
    if (!error) error = root.child("Error");
    if (!error) return std::nullopt;
    Ec2ErrorInfo info;
    info.code = error->child_text("Code");
    info.message = error->child_text("Message");
    info.request_id = root.child_text("RequestID", root.child_text("RequestId"));
    if (info.code.empty()) return std::nullopt;
    return info;
}

bool is_ec2_retryable_code(std::string_view code) {
    static constexpr std::string_view kRetryable[] = {"RequestLimitExceeded",
                                                      "Throttling",
                                                      "ThrottlingException",
                                                      "RequestThrottled",
                                                      "RequestThrottledException",
                                                      "TooManyRequestsException",
                                                      "EC2ThrottledException",
                                                      "BandwidthLimitExceeded",
                                                      "PriorRequestNotComplete",
                                                      "InternalError",
                                                      "InternalFailure",
                                                      "ServiceUnavailable",
                                                      "Unavailable",
                                                      "RequestTimeout",
                                                      "RequestTimeoutException"};
    return std::find(std::begin(kRetryable), std::end(kRetryable), code) != std::end(kRetryable);
}

// ----------------------------------------------------------------------------------------------
// URLs and times

UrlParts split_url(std::string_view url) {
    UrlParts parts;
    auto scheme_end = url.find("://");
    if (scheme_end != std::string_view::npos) {
        parts.scheme = std::string(url.substr(0, scheme_end + 3));
        url.remove_prefix(scheme_end + 3);
    }
    auto slash = url.find_first_of("/?#");
    parts.authority = std::string(url.substr(0, slash));
    if (slash != std::string_view::npos) parts.path = std::string(url.substr(slash));
    return parts;
}

std::string host_header_for_url(std::string_view url) {
    std::string authority = split_url(url).authority;
    // Credentials in the URL are never part of Host.
    if (auto at = authority.rfind('@'); at != std::string::npos) authority.erase(0, at + 1);
    // curl leaves out the scheme's default port, and so must the signed Host.
    std::string_view scheme = url.substr(0, url.find("://"));
    auto strip = [&](std::string_view port) {
        if (authority.size() > port.size() &&
            authority.compare(authority.size() - port.size(), port.size(), port) == 0) {
            authority.erase(authority.size() - port.size());
        }
    };
    if (scheme == "https") strip(":443");
    if (scheme == "http") strip(":80");
    return authority;
}

std::string format_iso8601(double epoch_seconds) {
    double whole = std::floor(epoch_seconds);
    auto micros = static_cast<long long>(std::llround((epoch_seconds - whole) * 1e6));
    std::time_t t = static_cast<std::time_t>(whole);
    if (micros >= 1000000) {
        ++t;
        micros -= 1000000;
    }
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[64];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    if (micros == 0) return fmt::format("{}Z", buf);
    return fmt::format("{}.{:06d}Z", buf, micros);
}

}  // namespace sky::detail::aws
