#!/bin/bash
# On the device machine: does the allocator's MADV_HUGEPAGE advice help or hurt a warm-cache
# first call? mlp and train_mlp in new processes, alternately with the advice and without it
# (bench/probes/no_hugepage.c preloaded); the first call, then calls 2-4.
set -euo pipefail
source bench/device_setup.sh
gcc -O2 -shared -fPIC bench/probes/no_hugepage.c -o /tmp/no_hugepage.so -ldl
cat /sys/kernel/mm/transparent_hugepage/enabled /sys/kernel/mm/transparent_hugepage/defrag
export COIL_CACHE_DIR=$(mktemp -d)
for w in ${WORKLOADS:-mlp train_mlp}; do
  build-device/bench/coil-bench --probe "$w" > /dev/null  # fills the caches
  for i in 1 2 3 4 5 6 7 8; do
    for preload in "" /tmp/no_hugepage.so; do
      t=$(LD_PRELOAD=$preload COIL_BENCH_PROBE_MORE=1 build-device/bench/coil-bench --probe "$w" 2>&1 |
            sed 's/call [0-9]: //; s/ ms//' | tr '\n' ' ')
      echo "$w ${preload:+no-hugepage }${preload:-hugepage    } calls 2-4 then first: $t"
    done
  done
done
