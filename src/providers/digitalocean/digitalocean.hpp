#pragma once
// sky::DigitalOcean as a cloud adapter (DigitalOcean API v2): sizes with their GPU facts and
// hourly prices, the pool's key as an account key, droplets with the boot script as user_data
// and the pool's tag, delete by id, list by tag.
#include <memory>

#include "sky/cloud.hpp"
#include "sky/providers.hpp"

namespace sky::detail {

/// The base URL when neither DigitalOcean{.endpoint} nor DIGITALOCEAN_API_URL is set. Overrides
/// include the version prefix, as here.
inline constexpr const char* kDigitalOceanDefaultUrl = "https://api.digitalocean.com/v2";

/// An adapter for `config` with the token from DIGITALOCEAN_TOKEN (ConfigError when unset).
std::unique_ptr<CloudAdapter> make_digitalocean_adapter(const DigitalOcean& config);

/// The tag every droplet of a pool carries ("sky-pool-<id>"); every sky droplet also carries
/// "sky".
std::string digitalocean_pool_tag(std::string_view pool_id);

}  // namespace sky::detail
