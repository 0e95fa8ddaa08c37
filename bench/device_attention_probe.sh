#!/bin/bash
# On the device machine: bench/probes/attention_products.cpp at 16 threads (and 8), to see
# where attention's time goes and which composition of its products is fastest.
set -euo pipefail
COIL_SKIP_BUILD=1 source bench/device_setup.sh
g++ -O3 -march=native -fopenmp bench/probes/attention_products.cpp -o /tmp/ap -ldnnl
for t in ${THREADS_LIST:-16 8}; do OMP_NUM_THREADS=$t /tmp/ap; done 2>&1 | tee "$OUT/attention_products.txt"
