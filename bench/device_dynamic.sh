#!/usr/bin/env bash
# On the device machine: every workload compiled with dynamic=true (graphs over size symbols,
# kernels taking their sizes at run time) against its static compile, the two called in turns
# in one process (`coil-bench --dynamic`), on the GPU (device time) and on its 16 CPU cores, for
# docs/performance.md's dynamic-shapes table; ROUNDS runs each (default 2), since the shared
# host's timings move between runs. DEVICES (default "cuda cpu") picks where; COIL_BENCH names
# a coil-bench already built (on a warm machine: build-gpu/bench/coil-bench after
# device_compare.sh), else it is built into build-device/. Results (tables and JSON) land in $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
B=${COIL_BENCH:-build-device/bench/coil-bench}
[ -n "${COIL_BENCH:-}" ] && export COIL_SKIP_BUILD=1  # the libraries alone
source bench/device_setup.sh  # builds coil-bench into build-device/
set +e  # one failing run does not stop the others
for dev in ${DEVICES:-cuda cpu}; do
  flags=$([ $dev = cuda ] && echo "--device cuda" || echo "--threads 16")
  for r in $(seq 1 ${ROUNDS:-2}); do
    echo "== $dev, round $r"
    timeout 200 $B $flags --dynamic --json "$OUT/${dev}_dynamic_$r.json" 2>&1 |
      grep -E "^[a-z_]+ |dynamic / static"
  done
done
