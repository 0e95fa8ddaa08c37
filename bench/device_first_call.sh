#!/bin/bash
# On the device machine: a workload's warm-cache first call (train_mlp by default) in new
# processes, three times each at 16, 4 and 1 threads, with the next three calls for scale.
set -euo pipefail
source bench/device_setup.sh
w=${WORKLOAD:-train_mlp}
export COIL_CACHE_DIR=$(mktemp -d)
build-device/bench/coil-bench --probe "$w" > /dev/null  # fills the code cache
for threads in 16 4 1; do
  for i in 1 2 3; do
    t=$(OMP_NUM_THREADS=$threads COIL_BENCH_PROBE_MORE=1 build-device/bench/coil-bench \
          --probe "$w" 2>&1 | tr '\n' ' ')
    echo "$threads threads: calls 2-4, then the first call (ms): $t"
  done
done
