#!/bin/bash
# On the device machine (prebuilt: build/probes/gpt2_products from bench/probes/gpt2_products.cpp):
# GPT-2 small's training-step products on the host's cores, coil with each library in turns
# (ROUNDS rounds), with and without threads bound to cores, and PyTorch's own at the same layouts.
set -uo pipefail
threads=${THREADS:-16}
for r in $(seq "${ROUNDS:-2}"); do
  for lib in onednn openblas; do
    echo "== round $r, $lib"
    COIL_MATMUL_LIBRARY=$lib OMP_NUM_THREADS=$threads build/probes/gpt2_products
    echo "== round $r, $lib, OMP_PROC_BIND=close OMP_PLACES=cores"
    COIL_MATMUL_LIBRARY=$lib OMP_PROC_BIND=close OMP_PLACES=cores OMP_NUM_THREADS=$threads \
      build/probes/gpt2_products
  done
  echo "== round $r, torch"
  OMP_NUM_THREADS=$threads python3 bench/probes/torch_gpt2_products.py
done
