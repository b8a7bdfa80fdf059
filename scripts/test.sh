#!/usr/bin/env bash
# The README's second command: install what is missing, build everything, run the whole suite.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${SKY_BUILD_DIR:-$root/build}
"$root/scripts/install-deps.sh"
"$root/scripts/configure.sh"
"$root/scripts/install-s3rver.sh" "$build"
# The Kubernetes test cluster's binaries and images, built once into a cache outside the clone
# (10+ minutes cold; nothing when cached). As root only: its tests skip elsewhere.
if [ "$(id -u)" -eq 0 ]; then "$root/tests/hosts/kubernetes/build.sh" > /dev/null; fi
cd "$build"
# Two tests per core: most end-to-end tests wait on timers, test hosts and fakes rather than
# compute, and each test's hosts live in namespaces and a subnet of their own, so tests run side
# by side (SKY_TEST_JOBS overrides).
ctest --output-on-failure --timeout 300 -j "${SKY_TEST_JOBS:-$(($(nproc) * 2))}" "$@"
