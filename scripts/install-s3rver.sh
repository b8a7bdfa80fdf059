#!/usr/bin/env bash
# tests/e2e/volumes' S3 server: npm's s3rver, into <build dir>/npm only, where it is missing (the
# volume tests skip without it). Used by scripts/test.sh and scripts/sanitizers.sh.
#   scripts/install-s3rver.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: scripts/install-s3rver.sh BUILD_DIR}
if [ ! -x "$build/npm/node_modules/.bin/s3rver" ] && command -v npm > /dev/null; then
  npm install --prefix "$build/npm" --no-audit --no-fund --loglevel=error s3rver@3.7.1 > /dev/null ||
    echo "sky: could not install s3rver from npm: tests/e2e/volumes will skip"
fi
