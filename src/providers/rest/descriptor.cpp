// The REST clouds' descriptors: what is not a template (descriptor.hpp).
#include "providers/rest/descriptor.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>

#include "providers/rest/json_api.hpp"
#include "util/env.hpp"

namespace sky::detail::rest {

std::function<CredentialStatus()> env_credentials(std::vector<const char*> keys,
                                                  const char* url_env, std::string default_url,
                                                  const char* home_file) {
    return [=] {
        CredentialStatus c;
        c.endpoint = env_or(url_env, default_url);
        bool all = true;
        std::string names;
        for (const char* k : keys) {
            names += (names.empty() ? "" : ", ") + std::string(k);
            if (auto v = env_or(k); !v.empty())
                c.secrets.push_back(v);
            else
                all = false;
        }
        const char* home = std::getenv("HOME");
        if (all) {
            c.present = true;
            c.source = "environment (" + names + ")";
        } else if (home_file && home &&
                   std::filesystem::exists(std::string(home) + "/" + home_file)) {
            c.present = true;
            c.source = std::string("~/") + home_file;
        } else {
            c.source =
                "missing: set " + names + (home_file ? std::string(" or ~/") + home_file : "");
        }
        return c;
    };
}

void check_spec(const CloudNames& names, const std::string& endpoint, const PoolSpec& spec,
                std::vector<std::string>& problems) {
    if (!endpoint.empty()) {
        try {
            check_endpoint(names.display, {endpoint, names.config + " endpoint"});
        } catch (const ConfigError& e) {
            problems.push_back(std::string("provider: ") + e.what());
        }
    }
    if (!names.gpu_only.empty() && !spec.accelerator && !spec.machine)
        problems.push_back("provider: " + names.config + " rents " + names.gpu_only +
                           " only: set PoolSpec::accelerator (e.g. \"RTX4090\")");
}

Exposure container_exposure(std::string_view display) {
    return Exposure::open_to_others(fmt::format(
        "{} nodes are containers on shared hosts that map only SSH: ranks on different nodes "
        "cannot reach each other, and {}: every other process of a node's container can "
        "(docs/distributed.md)",
        display, rendezvous_services));
}

}  // namespace sky::detail::rest
