#include "http/client_address.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstdlib>

#include "http/http_client.hpp"
#include "sky/errors.hpp"
#include "util/text.hpp"

namespace sky::detail {

std::optional<std::string> client_cidr_from_env() {
    const char* v = std::getenv("SKY_CLIENT_CIDR");
    if (!v || !*v) return std::nullopt;
    std::string text(trim(v));
    std::string addr = text.substr(0, text.find('/'));
    const bool v6 = addr.find(':') != std::string::npos;
    unsigned char buf[sizeof(in6_addr)];
    int bits = v6 ? 128 : 32;
    bool ok = ::inet_pton(v6 ? AF_INET6 : AF_INET, addr.c_str(), buf) == 1;
    if (ok && text.find('/') != std::string::npos) {
        const std::string len = text.substr(text.find('/') + 1);
        ok = !len.empty() && len.size() <= 3 &&
             std::all_of(len.begin(), len.end(), [](char c) { return c >= '0' && c <= '9'; });
        if (ok) {
            const int n = std::stoi(len);
            ok = n >= 0 && n <= bits;
            bits = n;
        }
    }
    if (!ok)
        throw ConfigError("SKY_CLIENT_CIDR: \"" + text +
                          "\" is not an address or CIDR (e.g. 203.0.113.7/32)");
    return addr + "/" + std::to_string(bits);
}

std::optional<std::string> detect_client_cidr() {
    try {
        HttpOptions o;
        o.connect_timeout = std::chrono::seconds(3);
        o.attempt_timeout = std::chrono::seconds(5);
        o.retry.max_attempts = 2;
        o.max_body_bytes = 256;
        std::string ip(
            trim(http_send({.method = "GET", .url = "https://checkip.amazonaws.com/"}, o).body));
        in_addr a{};
        if (::inet_pton(AF_INET, ip.c_str(), &a) == 1) return ip + "/32";
    } catch (const std::exception&) {
    }
    return std::nullopt;
}

}  // namespace sky::detail
