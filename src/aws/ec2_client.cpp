#include "aws/ec2_client.hpp"

#include <fmt/format.h>

#include <fstream>

#include "http/endpoint.hpp"
#include "util/env.hpp"
#include "util/text.hpp"

namespace sky::detail::aws {

EndpointChoice choose_endpoint(const std::string& explicit_url,
                               const std::string& explicit_source) {
    if (!explicit_url.empty()) return {explicit_url, explicit_source};
    for (const char* name : {"AWS_ENDPOINT_URL_EC2", "AWS_ENDPOINT_URL"}) {
        if (std::string v = env_or(name); !v.empty()) return {v, name};
    }
    return {};
}

void check_endpoint(const std::string& url, const std::string& source) {
    check_endpoint_security(url, {.provider = "AWS",
                                  .source = source,
                                  .secrets = "the access key id, the session token",
                                  .payload = "instances' user-data"});
}

std::optional<Credentials> load_default_credentials(const std::string& explicit_profile) {
    Credentials from_env{env_or("AWS_ACCESS_KEY_ID"), env_or("AWS_SECRET_ACCESS_KEY"),
                         env_or("AWS_SESSION_TOKEN")};
    if (!from_env.access_key_id.empty() && !from_env.secret_access_key.empty()) return from_env;

    std::string path = env_or("AWS_SHARED_CREDENTIALS_FILE");
    if (path.empty() && !env_or("HOME").empty()) path = env_or("HOME") + "/.aws/credentials";
    std::string profile = explicit_profile.empty() ? env_or("AWS_PROFILE") : explicit_profile;
    if (profile.empty()) profile = "default";
    std::ifstream in(path);
    if (!in) return std::nullopt;
    Credentials found;
    bool in_profile = false;
    std::string line;
    for (int lines = 0; std::getline(in, line) && lines < 100000; ++lines) {
        line = std::string(trim(line));
        if (line.empty() || line[0] == '#' || line[0] == ';') continue;
        if (line.front() == '[' && line.back() == ']') {
            in_profile = trim(line.substr(1, line.size() - 2)) == profile;
            continue;
        }
        if (!in_profile) continue;
        auto eq = line.find('=');
        if (eq == std::string::npos) continue;
        std::string key(trim(line.substr(0, eq)));
        std::string value(trim(line.substr(eq + 1)));
        if (key == "aws_access_key_id") found.access_key_id = value;
        if (key == "aws_secret_access_key") found.secret_access_key = value;
        if (key == "aws_session_token") found.session_token = value;
    }
    if (found.access_key_id.empty() || found.secret_access_key.empty()) return std::nullopt;
    return found;
}

HttpOptions Ec2ClientConfig::default_http_options() {
    HttpOptions options;
    options.connect_timeout = std::chrono::seconds(10);
    options.attempt_timeout = std::chrono::seconds(60);
    options.retry.max_attempts = 5;
    options.retry.initial_backoff = std::chrono::milliseconds(250);
    options.retry.max_backoff = std::chrono::seconds(20);
    return options;
}

Ec2Client::Ec2Client(Ec2ClientConfig config) : config_(std::move(config)) {
    endpoint_ = config_.endpoint.empty()
                    ? "https://" + config_.service + "." + config_.region + ".amazonaws.com"
                    : config_.endpoint;
    while (!endpoint_.empty() && endpoint_.back() == '/') endpoint_.pop_back();
    if (!config_.endpoint.empty()) {
        check_endpoint(config_.endpoint, config_.endpoint_source);
        // Signed requests, and RunInstances' user-data, go wherever the endpoint says.
        notice_once(endpoint_notice());
    }
    if (config_.credentials.access_key_id.empty() ||
        config_.credentials.secret_access_key.empty()) {
        throw sky::ConfigError(
            "AWS: no credentials (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
            "or configure ~/.aws/credentials)");
    }
    auto& http = config_.http;
    http.retry.is_retryable = [](const HttpResponse& r) {
        auto error = parse_ec2_error(r.body);
        return error && is_ec2_retryable_code(error->code);
    };
    http.parse_error = [](const HttpResponse& r) -> std::optional<ProviderErrorInfo> {
        if (auto error = parse_ec2_error(r.body)) {
            return ProviderErrorInfo{error->code, error->message};
        }
        return std::nullopt;
    };
    // Signed on every attempt, so a retry after a long backoff still carries a fresh date.
    http.prepare = [credentials = config_.credentials, region = config_.region,
                    service = config_.service](HttpRequest& req) {
        // The signed target is the URL's path and query, exactly as curl sends them.
        std::string_view url = req.url;
        auto authority = url.find("://");
        auto slash = url.find('/', authority == std::string_view::npos ? 0 : authority + 3);
        std::string target = slash == std::string_view::npos ? "/" : std::string(url.substr(slash));
        SignableRequest signable{
            req.method, target, {{"Host", host_header_for_url(req.url)}}, req.body};
        for (const auto& header : req.headers) signable.headers.push_back(header);
        sign_request(signable, credentials, SigningParams{region, service});
        for (const auto& [name, value] : signable.headers) {
            if (name != "Host") req.set_header(name, value);  // curl writes Host itself
        }
    };
}

std::string Ec2Client::endpoint_notice() const {
    if (config_.endpoint.empty()) return {};
    return fmt::format(
        "AWS requests signed with your credentials go to {} (set by {}), not to "
        "AWS's own endpoint",
        url_for_display(endpoint_), config_.endpoint_source);
}

XmlElement Ec2Client::call(std::string_view action, const QueryParams& params) const {
    HttpRequest request{.method = "POST", .url = endpoint_ + "/"};
    request.set_header("Content-Type", std::string(kQueryContentType));
    request.body = ec2_query_body(action, params, config_.api_version);
    request.secret_values = {config_.credentials.secret_access_key};
    if (!config_.credentials.session_token.empty()) {
        request.secret_values.push_back(config_.credentials.session_token);
    }
    HttpResponse response = http_send(std::move(request), config_.http);
    try {
        return parse_xml(response.body);
    } catch (const XmlError& e) {
        throw XmlError("EC2 " + std::string(action) + ": " + e.what());
    }
}

nlohmann::json Ec2Client::call_json(std::string_view action, const QueryParams& params) const {
    return xml_to_json(call(action, params));
}

}  // namespace sky::detail::aws
