#!/usr/bin/env bash
# Configures and builds sky in build/ (or $SKY_BUILD_DIR). Arguments are ninja targets.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${SKY_BUILD_DIR:-$root/build}
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" >/dev/null
fi
cmake --build "$build" -- "$@"
