#!/bin/bash
# On the device machine: where a workload's time goes between oneDNN and the rest. Runs
# coil-bench on one workload (default mm_softmax) with ONEDNN_VERBOSE=1 and prints the median
# execution time oneDNN reports for each product shape, next to coil-bench's own row.
set -euo pipefail
source bench/device_setup.sh
w=${WORKLOAD:-mm_softmax}
ONEDNN_VERBOSE=1 build-device/bench/coil-bench --threads "${THREADS:-16}" --filter "$w" \
  --reps 200 > "$OUT/verbose_$w.txt" 2>&1
grep -v '^onednn_verbose' "$OUT/verbose_$w.txt" | tail -3
grep '^onednn_verbose,exec' "$OUT/verbose_$w.txt" | awk -F, '{print $5, $(NF-1), $NF}' |
  sort -k2,2 -k3,3n | awk '{k=$1" "$2; n[k]++; v[k, n[k]]=$3}
    END {for (k in n) printf "oneDNN %s: %d calls, median %.3f ms\n", k, n[k], v[k, int((n[k]+1)/2)]}'
