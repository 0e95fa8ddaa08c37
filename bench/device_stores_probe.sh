#!/bin/bash
# On the device machine: bench/probes/streaming_stores.c at 16 threads and at 2, to see what
# ordinary stores' read-for-ownership costs a memory-bound kernel there.
set -euo pipefail
gcc -O3 -march=native -fopenmp bench/probes/streaming_stores.c -o /tmp/streaming_stores -lm
for t in ${THREADS_LIST:-16 2}; do OMP_NUM_THREADS=$t OMP_PROC_BIND=close /tmp/streaming_stores; done
