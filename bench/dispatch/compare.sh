#!/usr/bin/env bash
# Alternates two builds of bench/dispatch (`dispatch --compare`) so both see the same machine
# load, and prints each run's lines with the load average before it.
#   bench/dispatch/compare.sh BASELINE_DISPATCH NEW_DISPATCH [ROUNDS]
set -euo pipefail
if [[ $# -lt 2 ]]; then
    echo "usage: $0 BASELINE_DISPATCH NEW_DISPATCH [ROUNDS]" >&2
    exit 2
fi
baseline=$1
new=$2
rounds=${3:-4}
for ((i = 1; i <= rounds; i++)); do
    for which in baseline new; do
        if [[ $which == baseline ]]; then bin=$baseline; else bin=$new; fi
        read -r load1 _ < /proc/loadavg
        echo "== round $i $which (load average $load1)"
        "$bin" --compare
    done
done
