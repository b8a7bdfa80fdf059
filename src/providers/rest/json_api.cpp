#include "providers/rest/json_api.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <thread>

#include "http/endpoint.hpp"
#include "providers/cloud/refusal.hpp"
#include "util/env.hpp"
#include "util/text.hpp"

namespace sky::detail::rest {

Endpoint choose_endpoint(const std::string& explicit_url, const std::string& field, const char* env,
                         const std::string& default_url) {
    Endpoint e;
    if (!explicit_url.empty()) {
        e = {explicit_url, field};
    } else if (std::string v = env_or(env); !v.empty()) {
        e = {v, env};
    } else {
        e = {default_url, "default"};
    }
    while (!e.url.empty() && e.url.back() == '/') e.url.pop_back();
    return e;
}

std::string shown_url(const std::string& url) { return url_for_display(url); }

ApiConfig bearer_config(
    std::string provider, Endpoint endpoint, const std::string& key,
    std::function<std::optional<ProviderErrorInfo>(const HttpResponse&)> parse_error) {
    ApiConfig c;
    c.provider = std::move(provider);
    c.endpoint = std::move(endpoint);
    c.secrets = {key};
    c.authorize = [key](HttpRequest& r) { r.set_header("Authorization", "Bearer " + key); };
    c.parse_error = std::move(parse_error);
    return c;
}

std::string error_text(const std::exception& e) {
    if (auto* h = dynamic_cast<const HttpError*>(&e);
        h && (!h->code().empty() || !h->provider_message().empty()))
        return fmt::format("HTTP {} {}: {}", h->status(), h->code(), h->provider_message());
    return e.what();
}

void throw_provision_error(const std::string& message, const std::exception& cause) {
    // A refusal wrapped once already (a token renewal inside a call) stays a refusal.
    if (dynamic_cast<const CredentialsRefused*>(&cause)) throw CredentialsRefused(message);
    const auto* h = dynamic_cast<const HttpError*>(&cause);
    sky::detail::throw_provision_error(message, h ? h->status() : 0);
}

std::string pool_of_machine_name(std::string_view name) {
    auto hex = [](std::string_view s) {
        return std::all_of(s.begin(), s.end(),
                           [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
    };
    if (name.rfind("sky-", 0) != 0) return {};
    const std::string_view rest = name.substr(4);
    const auto n = rest.rfind("-n");
    if (n == std::string_view::npos) return {};
    const std::string_view pool = rest.substr(0, n), node = rest.substr(n + 2);
    const bool node_ok =
        !node.empty() && node.size() <= 6 &&
        std::all_of(node.begin(), node.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (pool.size() < 8 || pool.size() > 32 || !hex(pool) || !node_ok) return {};
    return std::string(pool);
}

CloudInstance unknown_instance(const std::string& id, std::string_view cloud) {
    CloudInstance u;
    u.id = id;
    u.state = CloudInstance::State::unknown;
    u.reason = "unknown to " + std::string(cloud);
    return u;
}

void JsonApi::notice_endpoint(std::string_view credential) const {
    // A notice, not an error: on stderr, once per process (not in the event stream).
    if (config_.endpoint.source != "default")
        notice_once(fmt::format("{}: requests with your {} go to {} (set by {})", config_.provider,
                                credential, shown_url(base_url()), config_.endpoint.source));
}

void check_endpoint(const std::string& provider, const Endpoint& e) {
    check_endpoint_security(e.url,
                            {provider, e.source, "the API credentials", "the nodes' boot scripts"});
}

std::string today_utc() {
    std::time_t now = std::time(nullptr);
    std::tm tm{};
    ::gmtime_r(&now, &tm);
    char buf[16];
    std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
    return buf;
}

HttpOptions ApiConfig::default_options() {
    HttpOptions o;
    o.connect_timeout = std::chrono::seconds(10);
    o.attempt_timeout = std::chrono::seconds(60);
    o.retry.max_attempts = 5;
    o.retry.initial_backoff = std::chrono::milliseconds(250);
    o.retry.max_backoff = std::chrono::seconds(20);
    return o;
}

JsonApi::JsonApi(ApiConfig config) : config_(std::move(config)) {
    check_endpoint(config_.provider, config_.endpoint);
}

HttpResponse JsonApi::send(const std::string& method, const std::string& path,
                           const std::optional<nlohmann::json>& body, Repeat repeat) const {
    HttpRequest req;
    req.method = method;
    req.url = config_.endpoint.url + path;
    req.set_header("Accept", "application/json");
    if (body) {
        req.set_header("Content-Type", "application/json");
        req.body = body->dump();
    }
    req.secret_values = config_.secrets;
    if (config_.later_secrets)
        for (auto& v : config_.later_secrets())
            if (!v.empty()) req.secret_values.push_back(std::move(v));
    HttpOptions o = config_.http;
    o.parse_error = config_.parse_error;
    auto authorize = config_.authorize;
    if (authorize) o.prepare = [authorize](HttpRequest& r) { authorize(r); };
    if (repeat == Repeat::once) {
        // A create that timed out may have happened: never send it again (what it started
        // carries the pool's tag or name and is found by list()). A 429 did nothing.
        o.retry.retry_on_server_errors = false;
        o.retry.retry_on_transport_errors = false;
        o.retry.is_retryable = [](const HttpResponse& r) { return r.status == 429; };
    }
    return http_send(std::move(req), o);
}

std::optional<nlohmann::json> json_answer(const std::function<HttpResponse()>& send, Repeat repeat,
                                          HttpResponse& last) {
    const int tries = repeat == Repeat::safe ? 3 : 1;
    for (int attempt = 1;; ++attempt) {
        last = send();
        if (trim(last.body).empty()) return nlohmann::json(nullptr);
        try {
            return nlohmann::json::parse(last.body);
        } catch (const std::exception&) {
            if (attempt >= tries) return std::nullopt;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(250) * attempt);
    }
}

nlohmann::json JsonApi::call(const std::string& method, const std::string& path,
                             const std::optional<nlohmann::json>& body, Repeat repeat) const {
    HttpResponse r;
    if (auto answer = json_answer([&] { return send(method, path, body, repeat); }, repeat, r))
        return std::move(*answer);
    if (!config_.quote_bodies)
        throw sky::Error(fmt::format("{}: {} {} answered with something that is not JSON",
                                     config_.provider, method, path));
    std::string excerpt = r.body.substr(0, 200);
    std::vector<std::string> secrets = config_.secrets;
    if (config_.later_secrets)
        for (auto& v : config_.later_secrets()) secrets.push_back(std::move(v));
    for (const auto& s : secrets)
        if (!s.empty())
            for (auto p = excerpt.find(s); p != std::string::npos; p = excerpt.find(s))
                excerpt.replace(p, s.size(), "[REDACTED]");
    throw sky::Error(fmt::format("{}: {} {} answered with something that is not JSON: {}",
                                 config_.provider, method, path, excerpt));
}

std::string text_of(const nlohmann::json& j, const char* key) {
    if (!j.is_object()) return {};
    auto it = j.find(key);
    if (it == j.end()) return {};
    if (it->is_string()) return it->get<std::string>();
    if (it->is_number_integer()) return std::to_string(it->get<long long>());
    if (it->is_number()) return fmt::format("{}", it->get<double>());
    return {};
}

std::optional<double> number_of(const nlohmann::json& j, const char* key) {
    if (!j.is_object()) return std::nullopt;
    auto it = j.find(key);
    if (it == j.end()) return std::nullopt;
    if (it->is_number()) return it->get<double>();
    if (it->is_string()) {
        try {
            std::size_t used = 0;
            double v = std::stod(it->get<std::string>(), &used);
            if (used > 0 && std::isfinite(v)) return v;
        } catch (const std::exception&) {
        }
    }
    return std::nullopt;
}

std::optional<int> int_of(const nlohmann::json& j, const char* key, int lo, int hi) {
    const auto v = number_of(j, key);
    if (!v || *v != std::floor(*v) || *v < lo || *v > hi) return std::nullopt;
    return static_cast<int>(*v);
}

std::optional<int> port_of(const nlohmann::json& j, const char* key) {
    return int_of(j, key, 1, 65535);
}

}  // namespace sky::detail::rest
