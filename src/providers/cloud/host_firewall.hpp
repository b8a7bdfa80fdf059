#pragma once
// sky's host firewall, for clouds without a firewall API (Verda): a part of the boot script that
// runs before anything of the pool listens and admits, on every port, only loopback, answers to
// connections the node opened, DHCP and IPv6 neighbour discovery, SSH from the client (or from
// anywhere when the client's address is unknown), and the pool's own nodes, which the client
// admits over SSH once it knows their addresses (RemoteNode runs the admit command with them
// before the node's worker starts, and on every node again when a node joins). It uses nftables
// where the image has `nft`, else iptables/ip6tables; an image with neither gets no firewall and
// the pool says so.
#include <optional>
#include <string>

namespace sky::detail {

/// The boot-script part, between the lines "# sky host firewall: begin" and "# sky host firewall:
/// end" (the fakes play it on their test hosts). `ssh_cidr`: who may reach port 22 (nullopt:
/// anyone). `dir`: where it writes its admit command (`<dir>/admit-peers`, taking addresses as
/// arguments) and which firewall it set up (`<dir>/kind`: nft, iptables or none); tests pass a
/// scratch directory.
[[nodiscard]] std::string host_firewall_script(const std::optional<std::string>& ssh_cidr,
                                               const std::string& dir);

/// The same with the directory RemoteNode looks in (kHostFirewallDir).
[[nodiscard]] std::string host_firewall_script(const std::optional<std::string>& ssh_cidr);

}  // namespace sky::detail
