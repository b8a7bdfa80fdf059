#include "providers/cloud/host_firewall.hpp"

#include <fmt/format.h>

#include "providers/remote/remote_node.hpp"
#include "util/shell.hpp"

namespace sky::detail {

std::string host_firewall_script(const std::optional<std::string>& ssh_cidr,
                                 const std::string& dir) {
    const bool v6 = ssh_cidr && ssh_cidr->find(':') != std::string::npos;
    // nftables: one table of sky's own, a drop policy on input, peers in two sets.
    std::string ssh_nft = "tcp dport 22 accept";
    if (ssh_cidr)
        ssh_nft = fmt::format("{} saddr {} tcp dport 22 accept", v6 ? "ip6" : "ip", *ssh_cidr);
    // iptables: a chain of sky's own first in INPUT, ending in DROP; peers in SKY-PEERS.
    std::string ssh4 = "-p tcp --dport 22 -j ACCEPT", ssh6 = ssh4;
    if (ssh_cidr && v6) ssh4.clear(), ssh6 = "-s " + *ssh_cidr + " -p tcp --dport 22 -j ACCEPT";
    if (ssh_cidr && !v6) ssh6.clear(), ssh4 = "-s " + *ssh_cidr + " -p tcp --dport 22 -j ACCEPT";
    return fmt::format(
        R"(# sky host firewall: begin
# Before anything of the pool listens, nothing comes in but SSH from the client and whatever
# the pool's own nodes send (the client admits them by address).
sky_fw_dir={dir}
mkdir -p "$sky_fw_dir" && chmod 700 "$sky_fw_dir"
cat > "$sky_fw_dir/admit-peers" <<'SKY_ADMIT_PEERS'
#!/bin/sh
# sky: admits the pool's nodes (addresses as arguments) through this node's host firewall;
# an address after a '-' (-10.0.0.5) is forgotten instead (a node that left the pool), in the
# order given.
kind=$(cat "$(dirname "$0")/kind" 2>/dev/null)
echo "$kind"
for a in "$@"; do
  op=add
  case "$a" in -*) op=del; a=${{a#-}} ;; esac
  case "$a" in ''|*[!0-9a-fA-F.:]*) continue;; esac
  case "$op:$kind:$a" in
    add:nft:*:*) nft add element inet sky peers6 "{{ $a }}" ;;
    add:nft:*) nft add element inet sky peers4 "{{ $a }}" ;;
    add:iptables:*:*) ip6tables -C SKY-PEERS -s "$a" -j ACCEPT 2>/dev/null || ip6tables -A SKY-PEERS -s "$a" -j ACCEPT ;;
    add:iptables:*) iptables -C SKY-PEERS -s "$a" -j ACCEPT 2>/dev/null || iptables -A SKY-PEERS -s "$a" -j ACCEPT ;;
    # Forgetting one that is not there is done already; nft says so, iptables -C finds none.
    del:nft:*:*) nft get element inet sky peers6 "{{ $a }}" >/dev/null 2>&1 || continue
      nft delete element inet sky peers6 "{{ $a }}" ;;
    del:nft:*) nft get element inet sky peers4 "{{ $a }}" >/dev/null 2>&1 || continue
      nft delete element inet sky peers4 "{{ $a }}" ;;
    del:iptables:*:*) while ip6tables -C SKY-PEERS -s "$a" -j ACCEPT 2>/dev/null; do ip6tables -D SKY-PEERS -s "$a" -j ACCEPT || exit 4; done ;;
    del:iptables:*) while iptables -C SKY-PEERS -s "$a" -j ACCEPT 2>/dev/null; do iptables -D SKY-PEERS -s "$a" -j ACCEPT || exit 4; done ;;
    *) exit 3 ;;
  esac || exit 4
done
SKY_ADMIT_PEERS
chmod 700 "$sky_fw_dir/admit-peers"
sky_fw_iptables() {{
  local t
  for t in iptables ip6tables; do
    "$t" -N SKY-PEERS && "$t" -N SKY-IN && "$t" -A SKY-IN -i lo -j ACCEPT &&
      "$t" -A SKY-IN -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT || return 1
  done
  ip6tables -A SKY-IN -p ipv6-icmp -j ACCEPT &&
    iptables -A SKY-IN -p udp --sport 67 --dport 68 -j ACCEPT &&
    ip6tables -A SKY-IN -p udp --sport 547 --dport 546 -j ACCEPT || return 1
  {ssh4_rule}
  {ssh6_rule}
  for t in iptables ip6tables; do
    "$t" -A SKY-IN -j SKY-PEERS && "$t" -A SKY-IN -j DROP && "$t" -I INPUT 1 -j SKY-IN || return 1
  done
}}
if command -v nft >/dev/null 2>&1 && nft -f - <<'SKY_NFT'
table inet sky {{
  set peers4 {{ type ipv4_addr; }}
  set peers6 {{ type ipv6_addr; }}
  chain input {{
    type filter hook input priority 0; policy drop;
    iif "lo" accept
    ct state established,related accept
    icmpv6 type {{ nd-neighbor-solicit, nd-neighbor-advert, nd-router-advert, nd-redirect, packet-too-big }} accept
    udp sport 67 udp dport 68 accept
    udp sport 547 udp dport 546 accept
    {ssh_nft}
    ip saddr @peers4 accept
    ip6 saddr @peers6 accept
  }}
}}
SKY_NFT
then
  echo nft > "$sky_fw_dir/kind"
elif command -v iptables >/dev/null 2>&1 && command -v ip6tables >/dev/null 2>&1 &&
  sky_fw_iptables; then
  echo iptables > "$sky_fw_dir/kind"
else
  echo none > "$sky_fw_dir/kind"
  echo "sky: neither nftables nor iptables works here: this node has no host firewall" >&2
fi
# sky host firewall: end
)",
        fmt::arg("dir", shell_quote(dir)), fmt::arg("ssh_nft", ssh_nft),
        fmt::arg("ssh4_rule", ssh4.empty() ? ":" : "iptables -A SKY-IN " + ssh4 + " || return 1"),
        fmt::arg("ssh6_rule", ssh6.empty() ? ":" : "ip6tables -A SKY-IN " + ssh6 + " || return 1"));
}

std::string host_firewall_script(const std::optional<std::string>& ssh_cidr) {
    return host_firewall_script(ssh_cidr, kHostFirewallDir);
}

}  // namespace sky::detail
