#include "http/endpoint.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>

#include <cstdio>
#include <mutex>
#include <set>

#include "sky/errors.hpp"
#include "util/env.hpp"
#include "util/text.hpp"

namespace sky::detail {

std::string url_host(std::string_view url) {
    auto scheme_end = url.find("://");
    std::string_view rest = scheme_end == std::string_view::npos ? url : url.substr(scheme_end + 3);
    rest = rest.substr(0, rest.find_first_of("/?#"));
    if (auto at = rest.rfind('@'); at != std::string_view::npos) rest = rest.substr(at + 1);
    if (!rest.empty() && rest.front() == '[') {
        auto close = rest.find(']');
        return std::string(rest.substr(1, close == std::string_view::npos ? rest.npos : close - 1));
    }
    return std::string(rest.substr(0, rest.find(':')));
}

bool is_loopback_host(const std::string& host) {
    if (iequals(host, "localhost")) return true;
    in_addr v4{};
    if (::inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
    in6_addr v6{};
    if (::inet_pton(AF_INET6, host.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
    return false;
}

std::string url_for_display(const std::string& url) {
    auto scheme_end = url.find("://");
    if (scheme_end == std::string::npos) return url;
    auto authority_end = url.find_first_of("/?#", scheme_end + 3);
    auto at = url.rfind('@', authority_end == std::string::npos ? url.npos : authority_end);
    if (at == std::string::npos || at < scheme_end) return url;
    return url.substr(0, scheme_end + 3) + url.substr(at + 1);
}

void check_endpoint_security(const std::string& url, const EndpointUse& use) {
    const std::string shown = url_for_display(url);
    auto scheme_end = url.find("://");
    const std::string scheme = scheme_end == std::string::npos ? "" : url.substr(0, scheme_end);
    if (!(iequals(scheme, "http") || iequals(scheme, "https")) || url_host(url).empty()) {
        throw ConfigError(fmt::format("{}: {} is \"{}\": expected an http:// or https:// URL",
                                      use.provider, use.source, shown));
    }
    if (iequals(scheme, "https") || is_loopback_host(url_host(url))) return;
    if (env_or("SKY_ALLOW_INSECURE_ENDPOINT") == "1") {
        notice_once(
            fmt::format("{} is plain http:// to {} (SKY_ALLOW_INSECURE_ENDPOINT=1): {} and "
                        "every request travel unencrypted",
                        use.source, shown, use.secrets));
        return;
    }
    throw ConfigError(fmt::format(
        "{}: {} is \"{}\": plain http:// to a host that is not loopback would send {} and every "
        "request ({} included) in clear text; use https://, a loopback address, or set "
        "SKY_ALLOW_INSECURE_ENDPOINT=1",
        use.provider, use.source, shown, use.secrets, use.payload));
}

void notice_once(const std::string& text) {
    static std::mutex m;
    static std::set<std::string> said;
    std::lock_guard lk(m);
    if (!said.insert(text).second) return;
    std::fprintf(stderr, "sky: notice: %s\n", text.c_str());
}

}  // namespace sky::detail
