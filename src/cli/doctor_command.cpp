// `sky doctor`: for each provider in the registry, whether credentials are set (its
// descriptor's credentials()) and whether its endpoint answers. Never prints a secret: only
// where a credential came from.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "http/http_client.hpp"
#include "pool/display.hpp"
#include "providers/registry/registry.hpp"

namespace sky::cli {

namespace {

std::string mask(std::string text, const std::vector<std::string>& secrets) {
    for (auto& s : secrets)
        for (std::size_t p; !s.empty() && (p = text.find(s)) != std::string::npos;)
            text.replace(p, s.size(), "***");
    return text;
}

// Any HTTP answer (even 401/404) means the endpoint is there; only transport failures do not.
std::string probe(const detail::CredentialStatus& c, std::chrono::milliseconds timeout) {
    if (c.endpoint.empty()) return "-";
    detail::HttpRequest req;
    req.method = "GET";
    req.url = c.endpoint;
    req.secret_values = c.secrets;
    detail::HttpOptions o;
    o.connect_timeout = timeout;
    o.attempt_timeout = timeout;
    o.retry.max_attempts = 1;
    o.throw_on_http_error = false;
    try {
        auto r = detail::http_send(req, o);
        return fmt::format("answers (HTTP {})", r.status);
    } catch (const std::exception& e) {
        return "no answer: " + mask(e.what(), c.secrets);
    }
}

}  // namespace

int doctor_command(const std::vector<std::string>& args) {
    bool offline = false;
    for (auto& a : args) {
        if (a == "--help" || a == "-h") {
            std::puts(
                "usage: sky doctor [--offline]\n"
                "\n"
                "For each provider: whether credentials are set (and where from) and whether its\n"
                "endpoint answers (any HTTP answer counts; 5 s timeout). Secrets are never shown.\n"
                "  --offline   check credentials only, contact no endpoint");
            return 0;
        }
        if (a == "--offline") {
            offline = true;
            continue;
        }
        std::fprintf(stderr, "sky doctor: unknown option '%s' (see sky doctor --help)\n",
                     detail::terminal_safe(a).c_str());
        return 2;
    }
    std::printf("%-13s %-60s %s\n", "provider", "credentials", "endpoint");
    int clouds = 0, ready = 0;
    for (const auto& d : detail::providers()) {
        const std::string name(d.name);
        if (!d.credentials) {
            // Local, SSH and the simulated cloud need none.
            std::printf("%-13s %-60s %s\n", name.c_str(), "none needed",
                        name == "local" ? "this machine" : "-");
            continue;
        }
        ++clouds;
        const detail::CredentialStatus c = d.credentials();
        if (c.present) ++ready;
        const std::string where =
            c.present ? c.source
                      : (c.source.rfind("missing", 0) == 0 ? c.source : "missing: " + c.source);
        const std::string answer =
            offline ? "not checked (--offline)" : probe(c, std::chrono::seconds(5));
        std::printf(
            "%-13s %-60s %s %s\n", name.c_str(),
            detail::terminal_safe(mask(where, c.secrets)).c_str(),
            detail::terminal_safe(mask(c.endpoint.empty() ? "-" : c.endpoint, c.secrets)).c_str(),
            detail::terminal_safe(answer).c_str());
    }
    std::printf("\n%d of %d cloud providers have credentials.\n", ready, clouds);
    return 0;
}

}  // namespace sky::cli
