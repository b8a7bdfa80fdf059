#include "http/http_client.hpp"

#include <curl/curl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "util/text.hpp"

namespace sky::detail {

namespace {

std::optional<std::string> find_header(const HttpHeaders& headers, std::string_view name) {
    for (const auto& [key, value] : headers) {
        if (iequals(key, name)) return value;
    }
    return std::nullopt;
}

// Headers that carry credentials for the providers sky speaks to; always masked.
constexpr std::string_view kAlwaysSecretHeaders[] = {
    "authorization", "proxy-authorization", "x-amz-security-token", "x-api-key", "api-key",
    "cookie",        "set-cookie",          "x-auth-token"};
constexpr std::string_view kAlwaysSecretParams[] = {"api_key",
                                                    "apikey",
                                                    "token",
                                                    "access_token",
                                                    "x-amz-signature",
                                                    "x-amz-credential",
                                                    "x-amz-security-token"};

void replace_all(std::string& text, std::string_view what, std::string_view with) {
    if (what.empty()) return;
    for (std::size_t pos = text.find(what); pos != std::string::npos;
         pos = text.find(what, pos + with.size())) {
        text.replace(pos, what.size(), with);
    }
}

std::once_flag g_curl_init;

std::string status_text(long status) {
    return status == 0 ? "no response" : fmt::format("HTTP {}", status);
}

}  // namespace

void HttpRequest::set_header(std::string name, std::string value) {
    for (auto& [key, old] : headers) {
        if (iequals(key, name)) {
            old = std::move(value);
            return;
        }
    }
    headers.emplace_back(std::move(name), std::move(value));
}

std::optional<std::string> HttpRequest::header(std::string_view name) const {
    return find_header(headers, name);
}

std::optional<std::string> HttpResponse::header(std::string_view name) const {
    return find_header(headers, name);
}

HttpError::HttpError(Kind kind, long status, std::string code, std::string provider_message,
                     int attempts, std::string body, const std::string& what)
    : sky::Error(what),
      kind_(kind),
      status_(status),
      code_(std::move(code)),
      provider_message_(std::move(provider_message)),
      attempts_(attempts),
      body_(std::move(body)) {}

Redactor::Redactor(const HttpRequest& request) {
    for (auto name : kAlwaysSecretHeaders) secret_headers_.emplace_back(name);
    for (const auto& name : request.secret_headers) secret_headers_.push_back(name);
    for (auto name : kAlwaysSecretParams) secret_params_.emplace_back(name);
    for (const auto& name : request.secret_query_params) secret_params_.push_back(name);

    auto add_literal = [this](std::string value) {
        if (value.empty()) return;
        std::string encoded = url_encode(value);
        if (encoded != value) literals_.push_back(std::move(encoded));
        literals_.push_back(std::move(value));
    };
    for (const auto& value : request.secret_values) add_literal(value);
    for (const auto& [name, value] : request.headers) {
        if (!is_secret_header(name)) continue;
        add_literal(value);
        // "Bearer <token>", "Basic <b64>", "AWS4-HMAC-SHA256 Credential=...": mask the part
        // after the scheme too, should it be quoted on its own.
        if (auto space = value.find(' '); space != std::string::npos) {
            add_literal(value.substr(space + 1));
        }
    }
    // Values of secret query parameters, wherever they reappear.
    if (auto q = request.url.find('?'); q != std::string::npos) {
        std::string_view query = std::string_view(request.url).substr(q + 1);
        if (auto hash = query.find('#'); hash != std::string_view::npos)
            query = query.substr(0, hash);
        while (!query.empty()) {
            auto amp = query.find('&');
            std::string_view pair = query.substr(0, amp);
            auto eq = pair.find('=');
            if (eq != std::string_view::npos) {
                auto name = url_decode(pair.substr(0, eq));
                bool secret = std::any_of(secret_params_.begin(), secret_params_.end(),
                                          [&](const std::string& s) { return iequals(s, name); });
                if (secret) {
                    add_literal(std::string(pair.substr(eq + 1)));
                    add_literal(url_decode(pair.substr(eq + 1)));
                }
            }
            if (amp == std::string_view::npos) break;
            query = query.substr(amp + 1);
        }
    }
    // Longest first, so a secret that contains another is masked whole.
    std::sort(literals_.begin(), literals_.end(),
              [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
    literals_.erase(std::unique(literals_.begin(), literals_.end()), literals_.end());
}

bool Redactor::is_secret_header(std::string_view name) const {
    return std::any_of(secret_headers_.begin(), secret_headers_.end(),
                       [&](const std::string& s) { return iequals(s, name); });
}

std::string Redactor::redact(std::string_view text) const {
    std::string out(text);
    for (const auto& literal : literals_) replace_all(out, literal, mask);
    return out;
}

std::string Redactor::redact_url(std::string_view url) const {
    std::string out;
    auto q = url.find('?');
    if (q == std::string_view::npos) return redact(url);
    out.append(url.substr(0, q + 1));
    std::string_view query = url.substr(q + 1);
    bool first = true;
    while (true) {
        auto amp = query.find('&');
        std::string_view pair = query.substr(0, amp);
        if (!first) out.push_back('&');
        first = false;
        auto eq = pair.find('=');
        auto name = url_decode(pair.substr(0, eq));
        bool secret = eq != std::string_view::npos &&
                      std::any_of(secret_params_.begin(), secret_params_.end(),
                                  [&](const std::string& s) { return iequals(s, name); });
        if (secret) {
            out.append(pair.substr(0, eq + 1));
            out.append(mask);
        } else {
            out.append(pair);
        }
        if (amp == std::string_view::npos) break;
        query = query.substr(amp + 1);
    }
    return redact(out);
}

bool is_retryable_status(long status) noexcept {
    return status == 429 || (status >= 500 && status <= 599 && status != 501);
}

std::chrono::milliseconds backoff_delay(const RetryPolicy& policy, int attempt) {
    using std::chrono::milliseconds;
    const auto cap = std::max<long long>(0, policy.max_backoff.count());
    long long base = std::max<long long>(0, policy.initial_backoff.count());
    // Doubling, saturating at the cap (no overflow whatever the attempt number).
    for (int i = 1; i < attempt && base < cap; ++i) base *= 2;
    base = std::min(base, cap);
    if (base <= 1) return milliseconds(base);
    thread_local std::mt19937_64 rng{std::random_device{}()};
    std::uniform_int_distribution<long long> jitter(0, base / 2);
    return milliseconds(base - base / 2 + jitter(rng));
}

namespace {

struct Attempt {
    bool transport_failed = false;
    bool timed_out = false;
    bool body_too_large = false;
    std::string transport_error;  // curl's description
    std::string curl_code;
    HttpResponse response;
};

// Where the body goes, and how much of it may come (after decompression).
struct BodySink {
    std::string* body;
    std::size_t limit;  // 0: none
    bool exceeded = false;
};

std::size_t write_body(char* data, std::size_t size, std::size_t count, void* user) {
    auto* sink = static_cast<BodySink*>(user);
    const std::size_t n = size * count;
    // Checked before appending: a decompressed body never grows past the limit in memory.
    if (sink->limit != 0 && n > sink->limit - std::min(sink->limit, sink->body->size())) {
        sink->exceeded = true;
        return 0;  // curl aborts the transfer (CURLE_WRITE_ERROR)
    }
    sink->body->append(data, n);
    return n;
}

std::size_t write_header(char* data, std::size_t size, std::size_t count, void* user) {
    auto* headers = static_cast<HttpHeaders*>(user);
    std::string_view line(data, size * count);
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
    // Each status line starts a new response (interim 100, proxies): keep only the last headers.
    if (line.substr(0, 5) == "HTTP/") {
        headers->clear();
    } else if (auto colon = line.find(':'); colon != std::string_view::npos) {
        std::string_view value = line.substr(colon + 1);
        while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
            value.remove_prefix(1);
        headers->emplace_back(std::string(line.substr(0, colon)), std::string(value));
    }
    return size * count;
}

Attempt perform(const HttpRequest& request, std::chrono::milliseconds connect_timeout,
                std::chrono::milliseconds timeout, std::size_t max_body_bytes) {
    std::call_once(g_curl_init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
    Attempt result;
    std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> handle(curl_easy_init(),
                                                               &curl_easy_cleanup);
    if (!handle) {
        result.transport_failed = true;
        result.transport_error = "curl_easy_init failed";
        result.curl_code = "CURLE_FAILED_INIT";
        return result;
    }
    CURL* h = handle.get();
    std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> header_list(nullptr,
                                                                            &curl_slist_free_all);
    auto append = [&](const std::string& line) {
        curl_slist* next = curl_slist_append(header_list.get(), line.c_str());
        if (next) {
            (void)header_list.release();
            header_list.reset(next);
        }
    };
    bool has_user_agent = false;
    for (const auto& [name, value] : request.headers) {
        if (iequals(name, "user-agent")) has_user_agent = true;
        // "Name;" is curl's way to send a header with an empty value.
        append(value.empty() ? name + ";" : name + ": " + value);
    }
    if (!has_user_agent) append("User-Agent: sky/" SKY_VERSION);
    append("Expect:");  // no 100-continue round trip

    char error_buffer[CURL_ERROR_SIZE] = {0};
    curl_easy_setopt(h, CURLOPT_URL, request.url.c_str());
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(connect_timeout.count()));
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS,
                     static_cast<long>(std::max<long long>(1, timeout.count())));
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, error_buffer);
    curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, header_list.get());
    BodySink sink{&result.response.body, max_body_bytes};
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &write_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &sink);
    // Refuses early a body whose announced (encoded) length is already too large; write_body
    // bounds the decoded size, which a compressed reply can multiply a thousandfold.
    if (max_body_bytes != 0) {
        curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(max_body_bytes));
    }
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, &write_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &result.response.headers);
    if (request.method == "GET") {
        curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    } else if (request.method == "HEAD") {
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    } else {
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, request.method.c_str());
    }
    if (!request.body.empty() || request.method == "POST" || request.method == "PUT" ||
        request.method == "PATCH") {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, request.body.data());
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
                         static_cast<curl_off_t>(request.body.size()));
    }

    std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> connect_to(nullptr,
                                                                           &curl_slist_free_all);
    if (request.tls) {
        const HttpTls& t = *request.tls;
        // Blobs are copied by curl (CURL_BLOB_COPY): the request may go away first.
        auto blob = [](const std::string& s) {
            return curl_blob{const_cast<char*>(s.data()), s.size(), CURL_BLOB_COPY};
        };
        if (!t.ca_pem.empty()) {
            curl_blob b = blob(t.ca_pem);
            curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &b);
        }
        if (!t.client_cert_pem.empty() && !t.client_key_pem.empty()) {
            curl_blob c = blob(t.client_cert_pem);
            curl_blob k = blob(t.client_key_pem);
            curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
            curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &c);
            curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
            curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &k);
        }
        if (!t.connect_to.empty()) {
            connect_to.reset(curl_slist_append(nullptr, t.connect_to.c_str()));
            curl_easy_setopt(h, CURLOPT_CONNECT_TO, connect_to.get());
        }
        if (t.insecure_skip_verify) {
            curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
            curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
        }
    }

    CURLcode code = curl_easy_perform(h);
    if (sink.exceeded || code == CURLE_FILESIZE_EXCEEDED) {
        result.body_too_large = true;
        result.response.body.clear();
        result.response.body.shrink_to_fit();
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &result.response.status);
        return result;
    }
    if (code != CURLE_OK) {
        result.transport_failed = true;
        result.timed_out = code == CURLE_OPERATION_TIMEDOUT;
        result.transport_error = error_buffer[0] ? error_buffer : curl_easy_strerror(code);
        result.curl_code = curl_easy_strerror(code);
        return result;
    }
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &result.response.status);
    return result;
}

std::string body_excerpt(const std::string& body) {
    constexpr std::size_t kMax = 300;
    std::string out = body.size() > kMax ? body.substr(0, kMax) + "..." : body;
    std::replace(out.begin(), out.end(), '\n', ' ');
    return out;
}

}  // namespace

namespace {

// SKY_HTTP_ATTEMPT_TIMEOUT_MS: a cap on every attempt of every API call, for a network where a
// minute per stalled answer is too long to wait (and for tests of stalled servers). 0 or unset:
// the caller's own bound.
std::chrono::milliseconds attempt_cap(std::chrono::milliseconds asked) {
    const char* v = std::getenv("SKY_HTTP_ATTEMPT_TIMEOUT_MS");
    if (!v || !*v) return asked;
    char* end = nullptr;
    const long long ms = std::strtoll(v, &end, 10);
    if (end == v || *end != '\0' || ms <= 0) return asked;
    return std::min(asked, std::chrono::milliseconds(ms));
}

}  // namespace

HttpResponse http_send(HttpRequest request, const HttpOptions& options_in) {
    using Clock = std::chrono::steady_clock;
    using std::chrono::milliseconds;
    HttpOptions capped;
    const HttpOptions* chosen = &options_in;
    if (const auto cap = attempt_cap(options_in.attempt_timeout);
        cap != options_in.attempt_timeout) {
        capped = options_in;
        capped.attempt_timeout = cap;
        capped.connect_timeout = std::min(capped.connect_timeout, cap);
        chosen = &capped;
    }
    const HttpOptions& options = *chosen;
    const int max_attempts = std::max(1, options.retry.max_attempts);
    const auto start = Clock::now();
    milliseconds total = options.total_timeout;
    if (total.count() <= 0) {
        total =
            options.attempt_timeout * max_attempts + options.retry.max_backoff * (max_attempts - 1);
    }
    const auto deadline = start + total;
    auto remaining = [&] {
        return std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    };

    for (int attempt = 1;; ++attempt) {
        HttpRequest current = request;
        if (options.prepare) options.prepare(current);
        const Redactor redactor(current);
        const std::string shown_url = redactor.redact_url(current.url);
        const auto left = remaining();
        if (left.count() <= 0) {
            throw HttpError(HttpError::Kind::timeout, 0, "timeout", "", attempt - 1, "",
                            fmt::format("{} {} timed out after {} attempt(s) ({} ms budget)",
                                        current.method, shown_url, attempt - 1, total.count()));
        }
        Attempt result = perform(current, std::min(options.connect_timeout, left),
                                 std::min(options.attempt_timeout, left), options.max_body_bytes);
        const bool last = attempt >= max_attempts;

        if (result.body_too_large) {
            // Not retried: the same endpoint would send the same oversized answer.
            auto what = fmt::format(
                "{} {} failed: the response body exceeds the limit of {} bytes ({} MiB; "
                "HttpOptions::max_body_bytes), transfer aborted",
                current.method, shown_url, options.max_body_bytes, options.max_body_bytes >> 20);
            spdlog::debug("http: {}", what);
            throw HttpError(HttpError::Kind::body_too_large, result.response.status, "BodyTooLarge",
                            "", attempt, "", what);
        }

        // Sleeps before the next attempt; false when the budget does not allow one.
        auto wait_for_retry = [&](milliseconds delay) {
            if (delay >= remaining()) return false;
            std::this_thread::sleep_for(delay);
            return true;
        };

        if (result.transport_failed) {
            const std::string reason = redactor.redact(result.transport_error);
            if (!last && options.retry.retry_on_transport_errors) {
                auto delay = backoff_delay(options.retry, attempt);
                spdlog::debug("http: {} {} attempt {}/{} failed ({}); retrying in {} ms",
                              current.method, shown_url, attempt, max_attempts, reason,
                              delay.count());
                if (wait_for_retry(delay)) continue;
            }
            auto kind = result.timed_out ? HttpError::Kind::timeout : HttpError::Kind::transport;
            auto what = fmt::format("{} {} {} after {} attempt(s): {}", current.method, shown_url,
                                    result.timed_out ? "timed out" : "failed", attempt, reason);
            spdlog::debug("http: {}", what);
            throw HttpError(kind, 0, result.curl_code, reason, attempt, "", what);
        }

        HttpResponse& response = result.response;
        const long status = response.status;
        const bool ok = status >= 200 && status < 300;
        bool retryable = false;
        if (!ok) {
            retryable = (options.retry.retry_on_server_errors && is_retryable_status(status)) ||
                        (options.retry.is_retryable && options.retry.is_retryable(response));
        }
        if (retryable && !last) {
            auto delay = backoff_delay(options.retry, attempt);
            // A server that says when to come back knows best (bounded by max_backoff).
            if (auto after = response.header("Retry-After")) {
                try {
                    auto seconds = std::stol(*after);
                    if (seconds >= 0) {
                        delay = std::min<milliseconds>(milliseconds(seconds * 1000),
                                                       options.retry.max_backoff);
                    }
                } catch (const std::exception&) {  // an HTTP date: keep our own backoff
                }
            }
            spdlog::debug("http: {} {} attempt {}/{} got {}; retrying in {} ms", current.method,
                          shown_url, attempt, max_attempts, status_text(status), delay.count());
            if (wait_for_retry(delay)) continue;
        }
        spdlog::debug("http: {} {} -> {} (attempt {})", current.method, shown_url,
                      status_text(status), attempt);
        if (ok || !options.throw_on_http_error) return std::move(response);

        std::optional<ProviderErrorInfo> info;
        if (options.parse_error) {
            try {
                info = options.parse_error(response);
            } catch (const std::exception&) {  // an unparsable error body: quote it instead
            }
        }
        std::string body = redactor.redact(response.body);
        std::string code = info ? redactor.redact(info->code) : "";
        std::string message = info ? redactor.redact(info->message) : "";
        std::string detail = info ? fmt::format("{}: {}", code, message) : body_excerpt(body);
        auto what = fmt::format("{} {} failed: {} {} (after {} attempt(s))", current.method,
                                shown_url, status_text(status), detail, attempt);
        throw HttpError(HttpError::Kind::status, status, std::move(code), std::move(message),
                        attempt, std::move(body), what);
    }
}

}  // namespace sky::detail
