// `sky doctor`: for each provider in the registry, whether credentials are set (its
// descriptor's credentials()) and, for those that have them, whether its endpoint answers: a
// cloud without credentials is "not checked" (no lookup, no connection: its answer could tell
// the user nothing). Never prints a secret: only where a credential came from. The table wraps
// long cells within their columns.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/pools.hpp"
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
                "For each provider: whether credentials are set (and where from) and, for those\n"
                "that have them, whether its endpoint answers (any HTTP answer counts; 5 s\n"
                "timeout). Providers without credentials are not contacted. Secrets are never\n"
                "shown.\n"
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
    // Wider cells wrap: the columns stay aligned on an 80-column terminal's worth of text.
    constexpr std::size_t kMaxCell = 40;
    std::vector<std::vector<std::string>> rows = {
        {"provider", "credentials", "endpoint", "answer"}};
    int clouds = 0, ready = 0;
    for (const auto& d : detail::providers()) {
        const std::string name(d.name);
        if (!d.credentials) {
            // Local, SSH and the simulated cloud need none.
            rows.push_back({name, "none needed", name == "local" ? "this machine" : "-", "-"});
            continue;
        }
        ++clouds;
        const detail::CredentialStatus c = d.credentials();
        if (c.present) ++ready;
        const std::string where =
            c.present ? c.source
                      : (c.source.rfind("missing", 0) == 0 ? c.source : "missing: " + c.source);
        std::string answer;
        if (!c.present)
            answer = "not checked (no credentials)";
        else if (offline)
            answer = "not checked (--offline)";
        else
            answer = probe(c, std::chrono::seconds(5));
        rows.push_back({name, mask(where, c.secrets),
                        mask(c.endpoint.empty() ? "-" : c.endpoint, c.secrets), answer});
    }
    print_table(rows, kMaxCell);  // print_table makes every cell terminal-safe
    std::printf("\n%d of %d cloud providers have credentials.\n", ready, clouds);
    return 0;
}

}  // namespace sky::cli
