#!/bin/bash
# sky: admits the pool's nodes through the host firewall that the node's boot script set up
# (providers/cloud/host_firewall.hpp): its admit command, as root.
#   admit_peers.sh DIR ADDRESS...   DIR holds the admit command (admit-peers); prints "absent"
#                                   when the boot script set none up.
set -u
f=$1/admit-peers
shift
S=
[ "$(id -u)" = 0 ] || S='sudo -n'
# shellcheck disable=SC2086  # S is a command prefix of words, or nothing
$S test -f "$f" || { echo absent; exit 0; }
# shellcheck disable=SC2086
exec $S sh "$f" "$@"
