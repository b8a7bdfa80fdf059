#!/usr/bin/env bash
# The README's first command: install what is missing, build, run examples/quickstart on Local.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/configure.sh" quickstart
exec "${SKY_BUILD_DIR:-$root/build}/examples/quickstart"
