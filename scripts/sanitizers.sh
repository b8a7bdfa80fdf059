#!/usr/bin/env bash
# Builds and runs a sanitizer preset (CMakePresets.json, docs/sanitizers.md):
#   scripts/sanitizers.sh asan [ctest arguments]   # the whole suite under ASan+UBSan
#   scripts/sanitizers.sh tsan [ctest arguments]   # the pool/runtime tests under TSan
# The test presets send every report to <build>/sanitizer.log.<pid> (log_path), because a
# Local worker's stderr is a pipe its own runtime drains: a report written there as the worker
# dies is lost, and the client only sees a lost node. This script fails when any such file
# exists after the run, also when ctest passed (a restarted worker can hide a crash from a test).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
preset=${1:?usage: scripts/sanitizers.sh asan|tsan [ctest arguments]}
shift
case "$preset" in
  asan | tsan) ;;
  *) echo "unknown preset $preset (asan or tsan)" >&2; exit 2 ;;
esac
build=$root/build-$preset
cd "$root"
[ -f "$build/build.ninja" ] || cmake --preset "$preset"
cmake --build --preset "$preset"
"$root/scripts/install-s3rver.sh" "$build"
rm -f "$build"/sanitizer.log.*
rc=0
ctest --preset "$preset" "$@" || rc=$?
shopt -s nullglob
logs=("$build"/sanitizer.log.*)
if [ ${#logs[@]} -gt 0 ]; then
  echo "sanitizer reports from ${#logs[@]} process(es):" >&2
  for f in "${logs[@]}"; do
    echo "==== $f" >&2
    cat "$f" >&2
  done
  [ "$rc" -ne 0 ] || rc=1
fi
exit "$rc"
