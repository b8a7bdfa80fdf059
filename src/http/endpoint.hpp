#pragma once
/// \file Where a provider's API requests may go: plain http:// only to this machine unless the
/// user says otherwise, since credentials and request bodies would travel in clear text. Every
/// provider's client checks its endpoint with this one function.
#include <string>
#include <string_view>

namespace sky::detail {

/// Host part of scheme://[user@]host[:port]/..., brackets removed from an IPv6 literal.
[[nodiscard]] std::string url_host(std::string_view url);

/// Whether a host name or address is this machine's loopback: localhost, 127.0.0.0/8 or ::1.
[[nodiscard]] bool is_loopback_host(const std::string& host);

/// The URL without any user:password part, for messages.
[[nodiscard]] std::string url_for_display(const std::string& url);

/// What an endpoint check says in its messages.
struct EndpointUse {
    std::string provider;  ///< starts every error: "AWS", "DigitalOcean"
    std::string source;    ///< what set the URL: "AWS_ENDPOINT_URL_EC2", "AWS{.endpoint}"
    std::string secrets;   ///< what plain http would expose: "the access key id, the session token"
    std::string payload;   ///< what the requests carry: "instances' user-data"
};

/// Refuses (sky::ConfigError naming `use.source`, never a password in the URL) a URL that is not
/// http:// or https:// with a host, and plain http:// to a host that is not loopback unless
/// SKY_ALLOW_INSECURE_ENDPOINT=1, which gets a notice instead.
void check_endpoint_security(const std::string& url, const EndpointUse& use);

/// Prints "sky: notice: <text>" on stderr, once per process for each text (a pool per call would
/// otherwise repeat it).
void notice_once(const std::string& text);

}  // namespace sky::detail
