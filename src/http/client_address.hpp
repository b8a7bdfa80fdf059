#pragma once
/// \file Who may reach a pool's SSH port: this client's address as a CIDR. Every cloud firewall
/// sky makes (AWS's security group, DigitalOcean's cloud firewall, the host firewall a Verda
/// node's boot script sets up) admits SSH from it alone where it is known.
#include <optional>
#include <string>

namespace sky::detail {

/// SKY_CLIENT_CIDR when set, normalised to "address/bits" (an address alone becomes /32 or
/// /128); nullopt when unset. Throws ConfigError naming the variable when it is no address or
/// CIDR.
[[nodiscard]] std::optional<std::string> client_cidr_from_env();

/// This client's public IPv4 address as AWS's checkip service sees it (https, a few seconds at
/// most), as "a.b.c.d/32"; nullopt when it cannot be learnt. Callers ask only when they talk to
/// the cloud's own endpoint: a private or fake endpoint says nothing about the path to the
/// machines.
[[nodiscard]] std::optional<std::string> detect_client_cidr();

}  // namespace sky::detail
