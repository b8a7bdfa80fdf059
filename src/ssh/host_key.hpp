#pragma once
// Internal helpers of the SSH layer for host-key pinning.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace sky::detail::ssh {

struct ParsedKey {
    std::string type;         ///< "ssh-ed25519"
    std::string fingerprint;  ///< "SHA256:..."
};

/// Parses "type base64 [comment]" or a known_hosts line; throws SshError.
ParsedKey parse_public_key_line(std::string_view line);
/// The keys a known_hosts file lists for host:port (plain, bracketed or hashed entries), minus
/// every key the file marks `@revoked` (for any host pattern): a revoked key is never accepted,
/// even when another line lists it.
std::vector<ParsedKey> known_hosts_entries(const std::filesystem::path& file,
                                           const std::string& host, std::uint16_t port);
/// Fingerprints of the keys a known_hosts file marks `@revoked` (whatever their host pattern).
std::vector<std::string> known_hosts_revoked(const std::filesystem::path& file);

}  // namespace sky::detail::ssh
