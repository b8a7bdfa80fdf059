#!/usr/bin/env bash
# The README's second command: install what is missing, build everything, run the whole suite.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${SKY_BUILD_DIR:-$root/build}
"$root/scripts/install-deps.sh"
"$root/scripts/configure.sh"
# tests/e2e/volumes' S3 server: npm's s3rver, into the build tree only, where it is missing (the
# volume tests skip without it).
if [ ! -x "$build/npm/node_modules/.bin/s3rver" ] && command -v npm > /dev/null; then
  npm install --prefix "$build/npm" --no-audit --no-fund --loglevel=error s3rver@3.7.1 > /dev/null ||
    echo "sky: could not install s3rver from npm: tests/e2e/volumes will skip"
fi
cd "$build"
ctest --output-on-failure --timeout 300 -j "$(nproc)" "$@"
