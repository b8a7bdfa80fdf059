#!/bin/bash
# A spot node's preemption probe (the node's launcher runs it every few seconds): asks the
# instance metadata, IMDSv2 only (a session token from a PUT first; the instances are launched
# with HttpTokens=required), whether EC2 is reclaiming this machine.
#   spot_probe.sh [ENDPOINT [MARKER]]
#     ENDPOINT  the metadata service (default http://169.254.169.254)
#     MARKER    asked only where this file exists (default /etc/sky/power-off-on-expiry, which
#               sky's own user-data leaves): never a machine sky did not launch
# Exit 0 with one line when there is a notice (the launcher's probe contract,
# runtime/preemption.hpp):
#   reclaim SECONDS REASON   spot/instance-action answered: the machine goes at SECONDS
#                            (its "time", seconds since the epoch)
#   warn SECONDS REASON      only events/recommendations/rebalance answered: the machine may go;
#                            an interruption notice gives at least two minutes, so not before
#                            its noticeTime + 120 s
# Exit 1 when there is none (404s), the metadata is unreachable, or an answer is unreadable.
set -u
endpoint=${1:-http://169.254.169.254}
marker=${2:-/etc/sky/power-off-on-expiry}
[ -f "$marker" ] || exit 1

token=$(curl -s -f -m 2 -X PUT "$endpoint/latest/api/token" \
  -H 'X-aws-ec2-metadata-token-ttl-seconds: 60') || exit 1
[ -n "$token" ] || exit 1

# The value of a string field of a one-level JSON object (EC2's answers here are that).
field() {
  sed -n "s/.*\"$1\"[[:space:]]*:[[:space:]]*\"\\([^\"]*\\)\".*/\\1/p" | head -n 1
}

get() {
  curl -s -f -m 2 -H "X-aws-ec2-metadata-token: $token" "$endpoint/latest/meta-data/$1"
}

if body=$(get spot/instance-action); then
  action=$(printf '%s' "$body" | field action)
  time=$(printf '%s' "$body" | field time)
  when=$(date -u -d "$time" +%s 2>/dev/null) || exit 1
  case "$action" in
  terminate | stop | hibernate) ;;
  *) exit 1 ;;
  esac
  printf 'reclaim %s spot instance-action: %s at %s\n' "$when" "$action" "$time"
  exit 0
fi

if body=$(get events/recommendations/rebalance); then
  time=$(printf '%s' "$body" | field noticeTime)
  when=$(date -u -d "$time" +%s 2>/dev/null) || exit 1
  printf 'warn %s rebalance recommendation at %s: EC2 may reclaim this spot capacity (no interruption notice yet)\n' \
    "$((when + 120))" "$time"
  exit 0
fi
exit 1
