#!/bin/bash
# On the device machine: bench/probes/attention_kernel.cpp at 16 threads (and 8): whether a
# hand-written fused attention kernel beats the library's products there.
set -euo pipefail
COIL_SKIP_BUILD=1 source bench/device_setup.sh
g++ -O3 -march=native -fopenmp bench/probes/attention_kernel.cpp -o /tmp/ak -ldnnl
lscpu | grep -E "Model name|MHz|Flags" | cut -c1-200
for t in ${THREADS_LIST:-16 8}; do OMP_NUM_THREADS=$t /tmp/ak; done 2>&1 | tee "$OUT/attention_kernel.txt"
