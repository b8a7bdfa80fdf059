#pragma once
// sky::VastAI as a cloud adapter over Vast.ai's REST API v0: offer search (POST /bundles/), asks
// accepted (PUT /asks/{id}/) with the boot script as onstart, instances (GET/DELETE
// /instances/{id}/), the pool's key as an account SSH key.
#include <memory>
#include <string>

#include "sky/cloud.hpp"
#include "sky/providers.hpp"

namespace sky::detail {

/// The base URL when neither VastAI{.endpoint} nor VAST_API_URL is set; overrides include the
/// version prefix, as here.
inline constexpr const char* kVastDefaultUrl = "https://console.vast.ai/api/v0";

/// An adapter for `config` with the key from VAST_API_KEY, else ~/.vast_api_key (ConfigError
/// when neither is there).
std::unique_ptr<CloudAdapter> make_vastai_adapter(const VastAI& config);

/// The onstart script a Vast.ai container runs: makes sure sshd is there, runs the boot script
/// (kept verbatim in a heredoc), then has sshd serve its pinned host key. Throws ProvisionError
/// when it passes Vast.ai's 4048-character limit.
std::string vastai_onstart(const std::string& boot_script, const std::string& authorized_key);

}  // namespace sky::detail
