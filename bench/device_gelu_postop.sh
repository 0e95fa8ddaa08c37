#!/bin/bash
# On the device machine: bench/probes/gelu_postop.cpp at 16 threads and at 2, to see whether
# gelu as oneDNN's post-op inside mlp's first product costs less than coil's generated gelu
# kernel after it (coil-micro's "compiled gelu [2048,2048]" gives the kernel's time).
set -euo pipefail
COIL_SKIP_BUILD=1 source bench/device_setup.sh
g++ -O2 -fopenmp bench/probes/gelu_postop.cpp -o /tmp/gp -ldnnl
for t in ${THREADS_LIST:-16 2}; do OMP_NUM_THREADS=$t /tmp/gp; done 2>&1 | tee "$OUT/gelu_postop.txt"
