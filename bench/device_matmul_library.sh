#!/bin/bash
# On the device machine: the matmul-bound workloads with each library taking the single
# float32 products (COIL_MATMUL_LIBRARY; batches always go to oneDNN), with steady-state
# times, the library's own time at the same shapes, and warm-cache first calls; then the
# workloads' pieces one by one (coil-micro) and where oneDNN's first call goes.
set -euo pipefail
source bench/device_setup.sh
for lib in openblas onednn; do
  for w in mm_softmax attention mlp; do  # "mlp" also selects train_mlp
    COIL_MATMUL_LIBRARY=$lib build-device/bench/coil-bench --threads "${THREADS:-16}" \
      --filter "$w" --json "$OUT/library_${lib}_$w.json" | tail -n +2 | sed "s/^/$lib /"
  done
done 2>&1 | tee "$OUT/library.txt"
for lib in openblas onednn; do
  echo "== coil-micro, $lib"
  COIL_MATMUL_LIBRARY=$lib build-device/bench/coil-micro --threads "${THREADS:-16}"
done 2>&1 | tee "$OUT/micro.txt"
g++ -std=c++17 -O2 -fopenmp bench/probes/onednn_first_call.cpp -ldnnl -o build-device/onednn-first
build-device/onednn-first 2>&1 | tee "$OUT/onednn_first.txt"
