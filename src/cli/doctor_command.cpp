// `sky doctor`: for each provider, whether credentials are set and whether its endpoint answers.
// Never prints a secret: only where a credential came from.
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "http/http_client.hpp"
#include "providers/aws/ec2_client.hpp"

namespace sky::cli {

namespace {

std::optional<std::string> env(const char* name) {
    const char* v = std::getenv(name);
    if (!v || !*v) return std::nullopt;
    return std::string(v);
}

std::string home_file(const char* rel) {
    const char* h = std::getenv("HOME");
    return h ? std::string(h) + "/" + rel : std::string();
}

struct Check {
    std::string provider;
    std::string credentials;  // where they come from, or "missing: ..."
    bool have_credentials = false;
    std::string endpoint;
    std::vector<std::string> secrets;  // masked if they ever show up in an error
};

std::string mask(std::string text, const std::vector<std::string>& secrets) {
    for (auto& s : secrets)
        for (std::size_t p; !s.empty() && (p = text.find(s)) != std::string::npos;)
            text.replace(p, s.size(), "***");
    return text;
}

// Any HTTP answer (even 401/404) means the endpoint is there; only transport failures do not.
std::string probe(const Check& c, std::chrono::milliseconds timeout) {
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
                     a.c_str());
        return 2;
    }
    std::vector<Check> checks;
    {
        Check c{"aws", "", false, "", {}};
        if (env("AWS_ACCESS_KEY_ID") && env("AWS_SECRET_ACCESS_KEY")) {
            c.credentials = "environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)";
            c.have_credentials = true;
        } else if (auto cred = detail::aws::load_default_credentials()) {
            c.credentials = fmt::format("~/.aws/credentials (profile {})",
                                        env("AWS_PROFILE").value_or("default"));
            c.have_credentials = true;
            c.secrets.push_back(cred->secret_access_key);
        } else {
            c.credentials =
                "missing: set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or ~/.aws/credentials";
        }
        if (auto s = env("AWS_SECRET_ACCESS_KEY")) c.secrets.push_back(*s);
        std::string region =
            env("AWS_REGION").value_or(env("AWS_DEFAULT_REGION").value_or("us-east-1"));
        c.endpoint =
            env("AWS_ENDPOINT_URL_EC2")
                .value_or(env("AWS_ENDPOINT_URL")
                              .value_or(fmt::format("https://ec2.{}.amazonaws.com/", region)));
        checks.push_back(c);
    }
    auto simple = [&](const char* provider, std::vector<const char*> keys, const char* url_env,
                      const char* default_url, const char* file = nullptr) {
        Check c{provider, "", false, env(url_env).value_or(default_url), {}};
        bool all = true;
        std::string names;
        for (auto* k : keys) {
            names += (names.empty() ? "" : ", ") + std::string(k);
            if (auto v = env(k))
                c.secrets.push_back(*v);
            else
                all = false;
        }
        if (all) {
            c.credentials = "environment (" + names + ")";
            c.have_credentials = true;
        } else if (file && std::filesystem::exists(home_file(file))) {
            c.credentials = std::string("~/") + file;
            c.have_credentials = true;
        } else {
            c.credentials = "missing: set " + names + (file ? std::string(" or ~/") + file : "");
        }
        checks.push_back(c);
    };
    simple("runpod", {"RUNPOD_API_KEY"}, "RUNPOD_API_BASE_URL", "https://api.runpod.io/graphql");
    simple("vastai", {"VAST_API_KEY"}, "VAST_API_URL", "https://console.vast.ai/api/v0",
           ".vast_api_key");
    {
        bool verda = env("VERDA_CLIENT_ID") && env("VERDA_CLIENT_SECRET");
        if (verda || !(env("DATACRUNCH_CLIENT_ID") && env("DATACRUNCH_CLIENT_SECRET")))
            simple("verda", {"VERDA_CLIENT_ID", "VERDA_CLIENT_SECRET"}, "VERDA_API_URL",
                   "https://api.verda.com/v1");
        else
            simple("verda", {"DATACRUNCH_CLIENT_ID", "DATACRUNCH_CLIENT_SECRET"}, "VERDA_API_URL",
                   "https://api.verda.com/v1");
    }
    simple("digitalocean", {"DIGITALOCEAN_TOKEN"}, "DIGITALOCEAN_API_URL",
           "https://api.digitalocean.com/v2");

    std::printf("%-13s %-60s %s\n", "provider", "credentials", "endpoint");
    std::printf("%-13s %-60s %s\n", "local", "none needed", "this machine");
    int ready = 0;
    for (auto& c : checks) {
        std::string answer =
            offline ? "not checked (--offline)" : probe(c, std::chrono::seconds(5));
        std::printf("%-13s %-60s %s %s\n", c.provider.c_str(), c.credentials.c_str(),
                    mask(c.endpoint, c.secrets).c_str(), answer.c_str());
        if (c.have_credentials) ++ready;
    }
    std::printf("\n%d of %zu cloud providers have credentials.\n", ready, checks.size());
    return 0;
}

}  // namespace sky::cli
