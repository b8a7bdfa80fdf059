#include "providers/kubernetes/api.hpp"

#include <fmt/format.h>

#include <map>
#include <mutex>
#include <sstream>

#include "http/http_client.hpp"
#include "util/encoding.hpp"

namespace sky::detail::kubernetes {

namespace {

// The Status a refusal carries; the body itself where it is none.
void status_of(const std::string& body, std::string& reason, std::string& message) {
    try {
        const auto j = nlohmann::json::parse(body);
        if (j.is_object() && j.value("kind", "") == "Status") {
            reason = j.value("reason", "");
            message = j.value("message", "");
            return;
        }
    } catch (...) {
    }
    message = body.substr(0, 400);
}

}  // namespace

ApiError::ApiError(long status, std::string reason, std::string message, const std::string& what)
    : sky::Error(what), status_(status), reason_(std::move(reason)), message_(std::move(message)) {}

KubeApi::KubeApi(std::shared_ptr<CredentialSource> credentials)
    : credentials_(std::move(credentials)) {}

std::string KubeApi::core(const std::string& resource, const std::string& ns) const {
    return fmt::format("/api/v1/namespaces/{}/{}", url_encode(ns.empty() ? target().ns : ns),
                       resource);
}

std::string KubeApi::send(const std::string& method, const std::string& path,
                          const std::string& body, const std::string& content_type,
                          std::chrono::milliseconds timeout) const {
    const KubeTarget& t = target();
    for (int attempt = 0;; ++attempt) {
        const Credential cred = credentials_->current();
        HttpRequest r;
        r.method = method;
        const std::string host =
            t.cluster.tls_server_name.empty() ? t.cluster.host : t.cluster.tls_server_name;
        const bool v6 = host.find(':') != std::string::npos;
        r.url = fmt::format("https://{}{}{}:{}{}{}", v6 ? "[" : "", host, v6 ? "]" : "",
                            t.cluster.port, t.cluster.base_path, path);
        r.set_header("Accept", "application/json");
        if (!body.empty()) r.set_header("Content-Type", content_type);
        r.body = body;
        if (!cred.bearer_token.empty()) {
            r.set_header("Authorization", "Bearer " + cred.bearer_token);
            r.secret_values.push_back(cred.bearer_token);
        }
        HttpTls tls;
        tls.ca_pem = t.cluster.ca_pem;
        tls.client_cert_pem = cred.client_cert_pem;
        tls.client_key_pem = cred.client_key_pem;
        tls.insecure_skip_verify = t.cluster.insecure_skip_tls_verify;
        if (!t.cluster.tls_server_name.empty())
            tls.connect_to = fmt::format("{}:{}:{}:{}", t.cluster.tls_server_name, t.cluster.port,
                                         t.cluster.host, t.cluster.port);
        r.tls = std::move(tls);
        HttpOptions o;
        o.attempt_timeout = timeout;
        o.throw_on_http_error = false;
        // A create is not idempotent: a lost answer is looked up by name, never sent again.
        o.retry.retry_on_transport_errors = method == "GET" || method == "DELETE";
        o.max_body_bytes = std::size_t{256} << 20;
        HttpResponse a;
        try {
            a = http_send(std::move(r), o);
        } catch (const HttpError& e) {
            throw ApiError(0, "", e.what(),
                           fmt::format("kubernetes: {} {} on {}: {}", method, path,
                                       t.cluster.server, e.what()));
        }
        if (a.status == 401 && attempt == 0) {
            credentials_->unauthorized(cred);
            continue;
        }
        if (a.status >= 200 && a.status < 300) return std::move(a.body);
        std::string reason, message;
        status_of(a.body, reason, message);
        // Nothing of the credential can be in the API's words, but a server may echo a header:
        // mask the token wherever it could appear.
        if (!cred.bearer_token.empty())
            for (std::size_t p; (p = message.find(cred.bearer_token)) != std::string::npos;)
                message.replace(p, cred.bearer_token.size(), "[REDACTED]");
        if (a.status == 401) {
            // Refused again with a fresh credential: say which, and what renews it.
            const std::string again =
                !t.token_file.empty()
                    ? ", also after re-reading its token file " + t.token_file.string()
                : t.exec ? ", also after running its exec plugin \"" + t.exec->command + "\" again"
                         : "";
            message += fmt::format(
                " (the API server refused the credential of user \"{}\" from {}{}: it has "
                "expired or was revoked; renew it and run again)",
                t.user_name, t.source, again);
        }
        throw ApiError(a.status, reason, message,
                       fmt::format("kubernetes: {} {} answered {}{}: {}", method, path, a.status,
                                   reason.empty() ? "" : " " + reason, message));
    }
}

nlohmann::json KubeApi::call(const std::string& method, const std::string& path,
                             const nlohmann::json& body, std::chrono::milliseconds timeout) const {
    const std::string text =
        send(method, path, body.is_null() ? std::string() : body.dump(),
             method == "PATCH" ? "application/merge-patch+json" : "application/json", timeout);
    if (text.empty()) return nlohmann::json::object();
    try {
        return nlohmann::json::parse(text);
    } catch (const std::exception& e) {
        throw ApiError(
            200, "", "an answer that is not JSON",
            fmt::format("kubernetes: {} {}: the answer is not JSON ({})", method, path, e.what()));
    }
}

std::optional<nlohmann::json> KubeApi::get_if(const std::string& path) const {
    try {
        return call("GET", path);
    } catch (const ApiError& e) {
        if (e.status() == 404) return std::nullopt;
        throw;
    }
}

std::vector<WatchEvent> KubeApi::watch(const std::string& path, const std::string& resource_version,
                                       std::chrono::seconds window) const {
    const std::string sep = path.find('?') == std::string::npos ? "?" : "&";
    const std::string text =
        send("GET",
             fmt::format("{}{}watch=1&allowWatchBookmarks=true&timeoutSeconds={}{}", path, sep,
                         window.count(),
                         resource_version.empty() ? "" : "&resourceVersion=" + resource_version),
             "", "", window + std::chrono::seconds(10));
    std::vector<WatchEvent> out;
    std::istringstream lines(text);
    for (std::string l; std::getline(lines, l);) {
        if (l.empty()) continue;
        nlohmann::json j;
        try {
            j = nlohmann::json::parse(l);
        } catch (...) {
            continue;  // a line cut short at the window's end
        }
        WatchEvent e{j.value("type", ""), j.value("object", nlohmann::json::object())};
        if (e.type == "ERROR") {
            const long code = e.object.value("code", 0L);
            throw ApiError(code, e.object.value("reason", ""), e.object.value("message", ""),
                           fmt::format("kubernetes: watch {}: {} {}", path, code,
                                       e.object.value("message", "")));
        }
        out.push_back(std::move(e));
    }
    return out;
}

std::shared_ptr<KubeApi> connect_api(const KubeconfigRequest& request) {
    KubeTarget t = load_kubeconfig(request);
    const std::string key = t.source + "\n" + t.context + "\n" + t.user_name;
    static std::mutex m;
    static std::map<std::string, std::weak_ptr<CredentialSource>> cache;
    std::shared_ptr<CredentialSource> creds;
    {
        std::lock_guard lk(m);
        creds = cache[key].lock();
        if (!creds) {
            creds = std::make_shared<CredentialSource>(t);
            cache[key] = creds;
        }
    }
    // The namespace is the request's (two pools may share a user but not a namespace).
    if (creds->target().ns != t.ns) creds = std::make_shared<CredentialSource>(std::move(t));
    return std::make_shared<KubeApi>(std::move(creds));
}

std::string label_selector(const std::vector<std::pair<std::string, std::string>>& labels) {
    std::string s;
    for (const auto& [k, v] : labels) s += (s.empty() ? "" : ",") + k + "=" + v;
    return url_encode(s);
}

}  // namespace sky::detail::kubernetes
