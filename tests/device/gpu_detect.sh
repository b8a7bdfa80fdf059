#!/usr/bin/env bash
# Builds tests/device/gpu_detect.cpp with g++ alone (a GPU machine may lack sky's other
# dependencies; cereal's headers are enough, from $CEREAL_INCLUDE or /usr/include) and runs it.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${TMPDIR:-/tmp}/sky-gpu-detect
g++ -std=c++20 -O1 -I "$root/include" -I "$root/src" ${CEREAL_INCLUDE:+-I "$CEREAL_INCLUDE"} \
  "$root/tests/device/gpu_detect.cpp" "$root/src/metrics/metrics.cpp" \
  "$root/src/catalog/accelerator.cpp" "$root/src/util/subprocess.cpp" -o "$out"
"$out"
