#pragma once
// The JSON-over-HTTPS client the REST clouds' adapters share (DigitalOcean, Verda, Vast.ai,
// RunPod): the base URL with its version prefix and where it came from, the check that keeps
// credentials off plain http to a remote host, authorization set fresh on every attempt, secrets
// masked in every error, and the retry rule for calls that must not run twice. Each adapter keeps
// its own mapping of the cloud's REST API; nothing here knows a cloud.
#include <exception>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "http/http_client.hpp"
#include "sky/cloud.hpp"
#include "sky/events.hpp"

namespace sky::detail::rest {

/// A base URL and what set it (a field or a variable's name), for messages.
struct Endpoint {
    std::string url;     ///< including the API's version prefix, no trailing '/'
    std::string source;  ///< "DigitalOcean{.endpoint}", "DIGITALOCEAN_API_URL" or "default"
};

/// `explicit_url` (named `field`) when set, else the variable `env`, else `default_url`; the
/// trailing '/' dropped.
[[nodiscard]] Endpoint choose_endpoint(const std::string& explicit_url, const std::string& field,
                                       const char* env, const std::string& default_url);

/// Refuses (ConfigError, starting with `provider`) a URL that is not http(s), and plain http:// to
/// a host that is not loopback unless SKY_ALLOW_INSECURE_ENDPOINT=1 (then a notice once).
void check_endpoint(const std::string& provider, const Endpoint& endpoint);

/// The URL without user:password@ (for messages).
[[nodiscard]] std::string shown_url(const std::string& url);

/// Today's date in UTC, "YYYY-MM-DD" (Offer::prices_date of live prices).
[[nodiscard]] std::string today_utc();

/// Whether a call may be sent twice: reads and deletes may; a create may not (only a 429, which
/// the service refused before doing anything, is retried).
enum class Repeat { safe, once };

struct ApiConfig {
    std::string provider;  ///< "DigitalOcean": starts every error message
    Endpoint endpoint;
    /// Sets the credentials on a request (called before every attempt).
    std::function<void(HttpRequest&)> authorize;
    /// Values masked wherever they could show (keys, tokens, client secrets).
    std::vector<std::string> secrets;
    /// Values that become secret while the API is used (tokens it hands out), asked for before
    /// every request and masked as `secrets` are.
    std::function<std::vector<std::string>()> later_secrets;
    /// False where answers are credentials (a token endpoint): an answer that is not JSON is
    /// not quoted in the error.
    bool quote_bodies = true;
    /// The cloud's error body to code and message.
    std::function<std::optional<ProviderErrorInfo>(const HttpResponse&)> parse_error;
    HttpOptions http = default_options();

    [[nodiscard]] static HttpOptions default_options();
};

/// The config of an API whose every request carries `Authorization: Bearer <key>`, with `key`
/// masked.
[[nodiscard]] ApiConfig bearer_config(
    std::string provider, Endpoint endpoint, const std::string& key,
    std::function<std::optional<ProviderErrorInfo>(const HttpResponse&)> parse_error);

/// The answer of `send()` as JSON (null for an empty body). A call that may run twice is sent
/// again, twice at most, while its 2xx answer is not JSON: a proxy's error page, or a body
/// something cut short, is not the cloud's answer. Nothing when it never was JSON (the last
/// answer is in `last`).
[[nodiscard]] std::optional<nlohmann::json> json_answer(const std::function<HttpResponse()>& send,
                                                        Repeat repeat, HttpResponse& last);

class JsonApi {
public:
    explicit JsonApi(ApiConfig config);

    /// `method` on base URL + `path` (which starts with '/' and may carry a query), with `body`
    /// as JSON when given. Throws HttpError for a non-2xx answer.
    HttpResponse send(const std::string& method, const std::string& path,
                      const std::optional<nlohmann::json>& body = std::nullopt,
                      Repeat repeat = Repeat::safe) const;
    /// send(), then the answer as JSON (null for an empty body). A body that is not JSON is a
    /// sky::Error naming the call.
    nlohmann::json call(const std::string& method, const std::string& path,
                        const std::optional<nlohmann::json>& body = std::nullopt,
                        Repeat repeat = Repeat::safe) const;

    /// When the endpoint is not the cloud's own: a notice on stderr, once per process, that
    /// requests with the user's `credential` ("API key") go there, and what set it.
    void notice_endpoint(std::string_view credential) const;

    [[nodiscard]] const std::string& base_url() const { return config_.endpoint.url; }
    [[nodiscard]] const ApiConfig& config() const { return config_; }

private:
    ApiConfig config_;
};

/// An error as the REST clouds quote it: "HTTP <status> <code>: <message>" for an HttpError that
/// carries the cloud's code or message, else what() says.
[[nodiscard]] std::string error_text(const std::exception& e);

/// Throws CredentialsRefused(message) when `cause` is an HttpError answered 401 or 403 (asking
/// again cannot change that) or a CredentialsRefused, else ProvisionError(message).
[[noreturn]] void throw_provision_error(const std::string& message, const std::exception& cause);

/// The pool of a machine named as the cloud layer names them, "sky-<pool id>-n<node>" (a pool id
/// is 8 to 32 lowercase hex digits); "" for any other name: a machine someone named "sky-..."
/// by hand is never taken for a sky pool's (`sky gc --include-unknown` would end it).
[[nodiscard]] std::string pool_of_machine_name(std::string_view name);

/// What describe() reports for an id `cloud` ("Vast.ai") does not know.
[[nodiscard]] CloudInstance unknown_instance(const std::string& id, std::string_view cloud);

/// A JSON body's string member, "" when absent or not a string (numbers are printed).
[[nodiscard]] std::string text_of(const nlohmann::json& j, const char* key);
/// A JSON body's number member (a number, or a string holding one), nullopt otherwise.
[[nodiscard]] std::optional<double> number_of(const nlohmann::json& j, const char* key);
/// A JSON body's whole-number member in [lo, hi]; nullopt when absent, fractional or out of
/// range: a cloud's number never reaches a conversion that would be undefined.
[[nodiscard]] std::optional<int> int_of(const nlohmann::json& j, const char* key, int lo, int hi);
/// int_of for a TCP port: 1 to 65535.
[[nodiscard]] std::optional<int> port_of(const nlohmann::json& j, const char* key);

}  // namespace sky::detail::rest
