#!/usr/bin/env bash
# Soak: random calls on a sky::SSH pool over 4 test hosts while workers, sshd and links are killed
# and cut (bench/soak/soak.cpp). Prints the client's RSS, fds and threads every 10 s and a summary;
# exits non-zero on a lost or failed call or on growth. Not part of ctest.
#   scripts/soak.sh [minutes]     (default: $SKY_SOAK_MINUTES, else 30; SKY_SOAK_SEED fixes the dice)
# Builds in build-soak/ ($SKY_BUILD_DIR overrides). Needs root (network namespaces and sshd).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [ "$(id -u)" -ne 0 ]; then
  echo "soak.sh: needs root (the test hosts are network namespaces running sshd)" >&2
  exit 2
fi
minutes=${1:-${SKY_SOAK_MINUTES:-30}}
export SKY_BUILD_DIR=${SKY_BUILD_DIR:-$root/build-soak}
"$root/scripts/install-deps.sh"
"$root/scripts/configure.sh" bench_soak
exec "$SKY_BUILD_DIR/bench/soak/soak" "$minutes"
