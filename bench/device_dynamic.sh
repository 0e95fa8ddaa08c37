#!/usr/bin/env bash
# On the device machine: every workload compiled static and with dynamic=true (graphs over size
# symbols, kernels taking their sizes at run time), on its 16 CPU cores and on the GPU, for
# docs/performance.md's dynamic-shapes table. Results (tables and JSON) land in $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/device_setup.sh  # builds coil-bench into build-device/
set +e  # one failing run does not stop the others
for mode in static dynamic; do
  flag=$([ $mode = dynamic ] && echo --dynamic)
  echo "== CPU, $mode"
  build-device/bench/coil-bench --threads 16 $flag --json "$OUT/cpu_$mode.json" 2>&1 | tail -11
  echo "== GPU, $mode"
  build-device/bench/coil-bench --device cuda $flag --json "$OUT/cuda_$mode.json" 2>&1 | tail -11
done
