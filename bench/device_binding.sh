#!/bin/bash
# On the device machine: the memory-bound workloads with OpenMP's threads left to the
# scheduler (the default) and pinned (OMP_PROC_BIND close/spread), next to the hand-written
# softmax of bench/probes/streaming_stores.c, twice over; and the CPU's layout.
set -euo pipefail
source bench/device_setup.sh
lscpu | grep -E "Model name|Socket|NUMA|Thread|Core|L1d|L2|L3" || true
gcc -O3 -march=native -fopenmp bench/probes/streaming_stores.c -o /tmp/streaming_stores -lm
for round in 1 2; do
  for bind in false close spread; do
    echo "== round $round, OMP_PROC_BIND=$bind"
    OMP_PROC_BIND=$bind build-device/bench/coil-bench --threads 16 --filter softmax |
      grep -E "^(softmax|mm_softmax) "
    for w in layernorm_gelu sincos; do
      OMP_PROC_BIND=$bind build-device/bench/coil-bench --threads 16 --filter $w | grep "^$w "
    done
    OMP_PROC_BIND=$bind OMP_NUM_THREADS=16 /tmp/streaming_stores | grep -E "^(softmax|copy) +ordinary"
  done
done
