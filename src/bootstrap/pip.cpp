#include "bootstrap/pip.hpp"

#include <fmt/format.h>

#include "util/encoding.hpp"

namespace sky::detail {

namespace {

// A netrc token that Python's netrc module (pip's reader) reads back as written.
bool netrc_safe(const std::string& s) {
    if (s.empty()) return false;
    for (unsigned char c : s)
        if (c <= 0x20 || c == 0x7f || c == '"' || c == '\\' || c == '#' || c == '\'') return false;
    return true;
}

}  // namespace

PipFiles pip_files(const Image& image) {
    PipFiles f;
    for (const auto& p : image.pip) f.requirements += p + "\n";
    if (!image.pip_extra_index_url) return f;
    std::string url = *image.pip_extra_index_url;
    // scheme://[user[:password]@]host[:port][/path]: the userinfo moves into the netrc file
    // when both halves can be written there.
    const auto scheme = url.find("://");
    if (scheme != std::string::npos) {
        const auto start = scheme + 3;
        const auto end = url.find_first_of("/?#", start);
        const std::string authority =
            url.substr(start, end == std::string::npos ? std::string::npos : end - start);
        const auto at = authority.rfind('@');
        if (at != std::string::npos) {
            const std::string userinfo = authority.substr(0, at);
            const std::string hostport = authority.substr(at + 1);
            const auto colon = userinfo.find(':');
            const std::string user = url_decode(userinfo.substr(0, colon));
            const std::string password =
                colon == std::string::npos ? std::string() : url_decode(userinfo.substr(colon + 1));
            std::string host = hostport;
            if (!host.empty() && host.front() == '[') {
                host = host.substr(0, host.find(']') + 1);
            } else {
                host = host.substr(0, host.find(':'));
            }
            if (netrc_safe(user) && netrc_safe(password) && netrc_safe(host)) {
                f.netrc = fmt::format("machine {} login {} password {}\n", host, user, password);
                url = url.substr(0, start) + hostport +
                      (end == std::string::npos ? std::string() : url.substr(end));
            }
        }
    }
    f.extra_index_url = url;
    return f;
}

}  // namespace sky::detail
