#!/bin/bash
# On the device machine: bench/probes/gemm_epilogue.c at 16 threads and at 2, to see whether
# a row softmax is cheaper as the product's epilogue (per-thread row blocks) than after it.
set -euo pipefail
COIL_SKIP_BUILD=1 source bench/device_setup.sh
g++ -O3 -march=native -fopenmp bench/probes/gemm_epilogue.cpp -o /tmp/ge -ldnnl \
  -L/usr/lib/x86_64-linux-gnu/openblas-openmp -lopenblas -lm
for t in ${THREADS_LIST:-16 2}; do
  IFS=, read -ra shapes <<< "${SHAPES:-512 512 512}"
  for shape in "${shapes[@]}"; do OMP_NUM_THREADS=$t /tmp/ge $shape; done
done
