#pragma once
// The API server's REST side, on sky's HTTP client (http/http_client.hpp) with the kubeconfig's
// credentials (kubeconfig.hpp): JSON in and out, a 401 answered once with a fresh credential (a
// re-read token file, an exec plugin run again), 429 and 5xx retried by the client's policy, and
// every refusal an ApiError quoting the API's own Status (reason and message), never a credential.
// A watch is a bounded long poll (`watch=1&timeoutSeconds=N`): the client buffers whole answers,
// so each round returns the events of its window and the next resumes from the last
// resourceVersion (410 Gone: list again).
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "providers/kubernetes/kubeconfig.hpp"
#include "sky/errors.hpp"

namespace sky::detail::kubernetes {

/// The API server refused a request: its HTTP status (0: no answer), its Status `reason`
/// ("Forbidden", "NotFound", "AlreadyExists", "Gone", "Invalid", ...) and `message`.
class ApiError : public sky::Error {
public:
    ApiError(long status, std::string reason, std::string message, const std::string& what);
    [[nodiscard]] long status() const noexcept { return status_; }
    [[nodiscard]] const std::string& reason() const noexcept { return reason_; }
    /// The API's own words (e.g. `pods is forbidden: User "u" cannot create resource "pods"
    /// ...`, `exceeded quota: ...`).
    [[nodiscard]] const std::string& message() const noexcept { return message_; }

private:
    long status_;
    std::string reason_, message_;
};

/// One watch event.
struct WatchEvent {
    std::string type;  ///< ADDED, MODIFIED, DELETED, BOOKMARK, ERROR
    nlohmann::json object;
};

class KubeApi {
public:
    explicit KubeApi(std::shared_ptr<CredentialSource> credentials);

    /// The credentials (for exec and port-forward, which share them).
    [[nodiscard]] CredentialSource& credentials() const { return *credentials_; }
    [[nodiscard]] const KubeTarget& target() const { return credentials_->target(); }

    /// METHOD path (from /api or /apis, with its query) with a JSON body (null: none); the
    /// answer's JSON. Throws ApiError (a refusal, or no answer: status 0), ConfigError from the
    /// credentials.
    nlohmann::json call(const std::string& method, const std::string& path,
                        const nlohmann::json& body = nullptr,
                        std::chrono::milliseconds timeout = std::chrono::seconds(30)) const;
    /// GET that answers none for 404.
    std::optional<nlohmann::json> get_if(const std::string& path) const;

    /// One watch round of `path` (a collection with its labelSelector) from `resource_version`,
    /// at most `window` long: its events in order. Throws ApiError (410: the version is too old,
    /// list again).
    std::vector<WatchEvent> watch(const std::string& path, const std::string& resource_version,
                                  std::chrono::seconds window) const;

    /// "/api/v1/namespaces/<ns>/<resource>" of the target's namespace, or `ns`'s.
    [[nodiscard]] std::string core(const std::string& resource, const std::string& ns = {}) const;

private:
    std::string send(const std::string& method, const std::string& path, const std::string& body,
                     const std::string& content_type, std::chrono::milliseconds timeout) const;

    std::shared_ptr<CredentialSource> credentials_;
};

/// The API of the kubeconfig `request` names, its credentials shared by every pool of this
/// process that names the same file(s) and context (an exec plugin runs once per process until
/// its credential expires). Throws ConfigError as load_kubeconfig does.
std::shared_ptr<KubeApi> connect_api(const KubeconfigRequest& request);

/// `key=value,key2=value2` as a labelSelector query value (percent-encoded).
[[nodiscard]] std::string label_selector(
    const std::vector<std::pair<std::string, std::string>>& labels);

}  // namespace sky::detail::kubernetes
