#!/usr/bin/env bash
# A real NCCL rendezvous from sky's rendezvous variables (tests/device/nccl_rendezvous.cpp) on a
# GPU machine with PyTorch. sky's other dependencies need not be there: fmt (header-only),
# nlohmann-json and cereal headers come from $SKY_DEVICE_INCLUDE or /usr/include. Runs the
# NCCL backend with one rank per GPU, then gloo with 2 ranks (a rendezvous of several processes
# even on a one-GPU machine, where NCCL refuses two ranks on one device).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${TMPDIR:-/tmp}/sky-nccl-rendezvous
g++ -std=c++20 -O1 -DFMT_HEADER_ONLY -I "$root/include" -I "$root/src" \
  ${SKY_DEVICE_INCLUDE:+-I "$SKY_DEVICE_INCLUDE"} \
  "$root/tests/device/nccl_rendezvous.cpp" "$root/src/runtime/rendezvous.cpp" \
  "$root/src/metrics/metrics.cpp" "$root/src/catalog/accelerator.cpp" -o "$out"
export NCCL_DEBUG=${NCCL_DEBUG:-INFO}
"$out" nccl "$root/tests/device/nccl_allreduce.py"
"$out" gloo "$root/tests/device/nccl_allreduce.py" 2
