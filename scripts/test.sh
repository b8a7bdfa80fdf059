#!/usr/bin/env bash
# The README's second command: install what is missing, build everything, run the whole suite.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${SKY_BUILD_DIR:-$root/build}
"$root/scripts/install-deps.sh"
"$root/scripts/configure.sh"
"$root/scripts/install-s3rver.sh" "$build"
cd "$build"
ctest --output-on-failure --timeout 300 -j "$(nproc)" "$@"
