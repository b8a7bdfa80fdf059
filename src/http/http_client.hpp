#pragma once
/// \file libcurl-based HTTP client used by every provider adapter: timeouts, bounded retries with
/// exponential backoff and jitter, typed errors, and redaction of every secret from logs and
/// errors.
#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sky/errors.hpp"
#include "util/encoding.hpp"  // url_encode / url_decode, for the query strings callers build

namespace sky::detail {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

/// TLS beyond the system's defaults, for a server with its own authority and client
/// certificates (a Kubernetes API server). PEM text, never files: credentials read from a
/// kubeconfig's `-data` fields or an exec plugin's answer never touch the disk.
struct HttpTls {
    std::string ca_pem;  ///< trust only this authority (empty: the system's roots)
    std::string client_cert_pem, client_key_pem;  ///< present this certificate (both or neither)
    /// curl's CONNECT_TO ("name:port:host:port"): the URL names the certificate's host, the
    /// connection goes to the server's (a kubeconfig's tls-server-name). Empty: the URL's.
    std::string connect_to;
    /// No certificate check: only ever for a loopback server the caller allowed it for.
    bool insecure_skip_verify = false;
};

/// One HTTP request. Header names compare case-insensitively.
struct HttpRequest {
    std::string method = "GET";
    std::string url;
    HttpHeaders headers;
    std::string body;
    /// Headers whose values never appear in a log line or an error (`Authorization`,
    /// `X-Amz-Security-Token`, `X-Api-Key`, `Cookie` are always treated as secret).
    std::vector<std::string> secret_headers;
    /// Query parameters whose values are masked wherever the URL is shown (`api_key`, `token`,
    /// `X-Amz-Signature`, `X-Amz-Credential`, `X-Amz-Security-Token` always are).
    std::vector<std::string> secret_query_params;
    /// Literal values (API keys, secret keys, tokens) masked wherever they occur, including the
    /// response body quoted in an error message.
    std::vector<std::string> secret_values;
    /// TLS settings of its own (none: the system's roots, no client certificate).
    std::optional<HttpTls> tls;

    /// Sets (replaces) a header.
    void set_header(std::string name, std::string value);
    /// First value of a header, if present.
    [[nodiscard]] std::optional<std::string> header(std::string_view name) const;
};

/// One HTTP response (the last one received when redirects are followed).
struct HttpResponse {
    long status = 0;
    HttpHeaders headers;
    std::string body;

    [[nodiscard]] std::optional<std::string> header(std::string_view name) const;
};

/// What a provider said went wrong, extracted from an error response by the adapter.
struct ProviderErrorInfo {
    std::string code;     ///< e.g. "InvalidInstanceID.NotFound", "RequestLimitExceeded"
    std::string message;  ///< the provider's message
};

/// When and how often to try again.
struct RetryPolicy {
    int max_attempts = 4;  ///< total attempts, first one included (1 = no retry)
    std::chrono::milliseconds initial_backoff{200};
    std::chrono::milliseconds max_backoff{20000};
    /// Retry on 5xx and 429 responses.
    bool retry_on_server_errors = true;
    /// Retry after connection failures and timeouts (safe only for idempotent requests; EC2 calls
    /// carry a client token, most REST reads are idempotent).
    bool retry_on_transport_errors = true;
    /// Provider-specific throttling/transient errors in a response with any status (e.g. EC2's
    /// `RequestLimitExceeded` in a 503 or 400 body, JSON `Throttling`).
    std::function<bool(const HttpResponse&)> is_retryable;
};

/// Per-call options.
struct HttpOptions {
    std::chrono::milliseconds connect_timeout{10000};
    /// Bound on one attempt, connection included.
    std::chrono::milliseconds attempt_timeout{60000};
    /// Bound on the whole call, backoff sleeps included; 0 means attempts × attempt_timeout.
    std::chrono::milliseconds total_timeout{0};
    RetryPolicy retry;
    /// Throw HttpError for a non-2xx final response (otherwise it is returned).
    bool throw_on_http_error = true;
    /// Turns an error response into the provider's code and message, for HttpError.
    std::function<std::optional<ProviderErrorInfo>(const HttpResponse&)> parse_error;
    /// Called before every attempt with a fresh copy of the request, e.g. to (re)sign it so its
    /// timestamp stays fresh across backoff sleeps.
    std::function<void(HttpRequest&)> prepare;
    /// Largest response body accepted, counted after decompression (curl decodes gzip, br and
    /// zstd): a larger one aborts the transfer with HttpError kind body_too_large, so a hostile
    /// or broken endpoint (a gzip bomb) cannot exhaust memory. 0: no limit.
    std::size_t max_body_bytes = kDefaultMaxBodyBytes;

    static constexpr std::size_t kDefaultMaxBodyBytes = std::size_t{64} << 20;  ///< 64 MiB
};

/// An HTTP call failed: a non-2xx status, a connection failure or a timeout. The message names the
/// method, the redacted URL, the status and the provider's code and message, never a secret.
class HttpError : public sky::Error {
public:
    /// body_too_large: the (decoded) body passed HttpOptions::max_body_bytes; never retried.
    enum class Kind { status, transport, timeout, body_too_large };
    HttpError(Kind kind, long status, std::string code, std::string provider_message, int attempts,
              std::string body, const std::string& what);

    [[nodiscard]] Kind kind() const noexcept { return kind_; }
    /// HTTP status of the last response; 0 when none came.
    [[nodiscard]] long status() const noexcept { return status_; }
    /// Provider error code (from parse_error), or the curl error name for transport failures.
    [[nodiscard]] const std::string& code() const noexcept { return code_; }
    [[nodiscard]] const std::string& provider_message() const noexcept { return provider_message_; }
    [[nodiscard]] int attempts() const noexcept { return attempts_; }
    /// No answer came (a timeout, a connection cut, a body cut short) or the server failed: what
    /// was asked may have been carried out all the same (a create is then looked up, not sent
    /// again).
    [[nodiscard]] bool outcome_unknown() const noexcept { return status_ == 0 || status_ >= 500; }
    /// Last response body, with secrets masked.
    [[nodiscard]] const std::string& body() const noexcept { return body_; }

private:
    Kind kind_;
    long status_;
    std::string code_;
    std::string provider_message_;
    int attempts_;
    std::string body_;
};

/// Masks secrets in text shown to people.
class Redactor {
public:
    static constexpr std::string_view mask = "[REDACTED]";
    explicit Redactor(const HttpRequest& request);
    /// Masks every secret literal (and its URL-encoded form) in text.
    [[nodiscard]] std::string redact(std::string_view text) const;
    /// Masks the values of secret query parameters, then every literal.
    [[nodiscard]] std::string redact_url(std::string_view url) const;
    /// Whether a header's value must never be shown.
    [[nodiscard]] bool is_secret_header(std::string_view name) const;

private:
    std::vector<std::string> literals_;
    std::vector<std::string> secret_headers_;
    std::vector<std::string> secret_params_;
};

/// Is this status worth retrying by default (429 or 5xx except 501)?
[[nodiscard]] bool is_retryable_status(long status) noexcept;

/// Backoff before attempt `attempt + 1` (attempt counts from 1): exponential from initial_backoff,
/// capped at max_backoff, with "equal jitter" (half fixed, half random) so clients that failed
/// together do not retry together.
[[nodiscard]] std::chrono::milliseconds backoff_delay(const RetryPolicy& policy, int attempt);

/// Sends one request with the options' retries. Thread-safe: each call uses its own curl handle.
/// Throws HttpError (see HttpOptions::throw_on_http_error).
HttpResponse http_send(HttpRequest request, const HttpOptions& options = {});

}  // namespace sky::detail
