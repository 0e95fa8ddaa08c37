#!/usr/bin/env bash
# On the device machine: every workload compiled static and with dynamic=true (graphs over size
# symbols, kernels taking their sizes at run time), on its 16 CPU cores and on the GPU, for
# docs/performance.md's dynamic-shapes table; then ROUNDS more rounds (default 2) of the
# workloads in REPEAT, static and dynamic in turn, since the shared host's CPU timings move
# between runs. DEVICES (default "cuda cpu") picks where; COIL_BENCH names a coil-bench already
# built (on a warm machine: build-gpu/bench/coil-bench after device_compare.sh), else it is built
# into build-device/. Results (tables and JSON) land in $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
B=${COIL_BENCH:-build-device/bench/coil-bench}
[ -n "${COIL_BENCH:-}" ] && export COIL_SKIP_BUILD=1  # the libraries alone
source bench/device_setup.sh  # builds coil-bench into build-device/
set +e  # one failing run does not stop the others
for dev in ${DEVICES:-cuda cpu}; do
  flags=$([ $dev = cuda ] && echo "--device cuda" || echo "--threads 16")
  for mode in static dynamic; do
    flag=$([ $mode = dynamic ] && echo --dynamic)
    echo "== $dev, $mode"
    timeout 90 $B $flags $flag --json "$OUT/${dev}_$mode.json" 2>&1 | tail -12
  done
  for r in $(seq 2 $((${ROUNDS:-2} + 1))); do
    for mode in static dynamic; do
      flag=$([ $mode = dynamic ] && echo --dynamic)
      echo "== $dev, round $r, $mode"
      for f in ${REPEAT:-bn_relu instance_norm attention long_rows_sum}; do
        timeout 30 $B $flags --filter $f $flag 2>&1 | grep -E "^$f "
      done
    done
  done
done
