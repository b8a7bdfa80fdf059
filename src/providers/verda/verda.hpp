#pragma once
// sky::Verda (formerly DataCrunch) as a cloud adapter over Verda's public API v1: OAuth2 client
// credentials (JSON body) with refresh on 401, instance types and availability, SSH keys, one
// startup script per node, instances created and deleted (PUT /instances action delete).
#include <memory>

#include "sky/cloud.hpp"
#include "sky/providers.hpp"

namespace sky::detail {

/// The base URL when neither Verda{.endpoint} nor VERDA_API_URL is set; overrides include the
/// version prefix, as here ("https://api.datacrunch.io/v1" is the former name of the same API).
inline constexpr const char* kVerdaDefaultUrl = "https://api.verda.com/v1";

/// An adapter for `config` with VERDA_CLIENT_ID/VERDA_CLIENT_SECRET, else DATACRUNCH_CLIENT_ID/
/// DATACRUNCH_CLIENT_SECRET (ConfigError when neither pair is set).
std::unique_ptr<CloudAdapter> make_verda_adapter(const Verda& config);

}  // namespace sky::detail
