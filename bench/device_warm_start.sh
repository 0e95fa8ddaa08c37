#!/bin/bash
# On the device machine: train_mlp's warm-cache first call in new processes, with each
# compile's timeline (the graph cache's lookup, the library loads), then with the graph cache
# off (COIL_GRAPH_CACHE=0: every stage after capture runs, the code cache still warm).
set -euo pipefail
source bench/device_setup.sh
w=${WORKLOAD:-train_mlp}
export COIL_CACHE_DIR=$(mktemp -d)
build-device/bench/coil-bench --probe "$w" > /dev/null  # fills both caches
for cache in 1 0; do
  for i in 1 2 3 4 5; do
    t=$(COIL_GRAPH_CACHE=$cache COIL_LOGS=timeline COIL_BENCH_PROBE_MORE=1 \
          build-device/bench/coil-bench --probe "$w" 2>&1)
    echo "graph cache $cache, run $i:"
    echo "$t" | sed 's/^/  /'
  done
done
