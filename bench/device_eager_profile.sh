#!/bin/bash
# On the device machine: the host cost of eager GPU ops, coil's (coil_bench_overhead's CUDA
# benchmarks) beside PyTorch's for the same calls (bench/torch_overhead.py). Results land in
# $OUT.
set -uo pipefail
COIL_SKIP_BUILD=1 source bench/device_setup.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCOIL_BUILD_BENCH=ON \
  -DCOIL_BUILD_TESTS=OFF > "$OUT/cmake.log" 2>&1 || { tail -30 "$OUT/cmake.log"; exit 1; }
ninja -C build-gpu coil_bench_overhead > "$OUT/build.log" 2>&1 ||
  { grep -E "error|FAILED" -A5 "$OUT/build.log" | head -40; exit 1; }
build-gpu/bench/coil_bench_overhead --benchmark_filter=Cuda 2>&1 | grep -E "^BM_" |
  tee "$OUT/overhead.txt"
python3 bench/torch_overhead.py 2>&1 | tee -a "$OUT/overhead.txt"
