#!/bin/bash
# On the device machine: the host cost of eager GPU ops, coil's (coil_bench_overhead's CUDA
# benchmarks) beside PyTorch's for the same calls (bench/torch_overhead.py), and where coil's
# time goes when the machine has perf. Results land in $OUT.
set -uo pipefail
COIL_SKIP_BUILD=1 source bench/device_setup.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCOIL_BUILD_BENCH=ON \
  -DCMAKE_CXX_FLAGS="-g -fno-omit-frame-pointer" \
  -DCOIL_BUILD_TESTS=OFF > "$OUT/cmake.log" 2>&1 || { tail -30 "$OUT/cmake.log"; exit 1; }
ninja -C build-gpu coil_bench_overhead > "$OUT/build.log" 2>&1 ||
  { grep -E "error|FAILED" -A5 "$OUT/build.log" | head -40; exit 1; }
build-gpu/bench/coil_bench_overhead --benchmark_filter=Cuda 2>&1 | grep -E "^BM_" |
  tee "$OUT/overhead.txt"
python3 bench/torch_overhead.py 2>&1 | tee -a "$OUT/overhead.txt"
if command -v perf > /dev/null; then
  for bm in BM_EagerMatmulCuda BM_EagerAddOneCuda BM_EagerInPlaceMulCuda; do
    perf record -g -o /tmp/perf.data build-gpu/bench/coil_bench_overhead \
      --benchmark_filter="^$bm\$" > /dev/null 2>&1
    perf report -i /tmp/perf.data --stdio --no-children --percent-limit 1.5 2>/dev/null |
      grep -v "^$" | head -120 > "$OUT/perf_$bm.txt"
  done
else
  echo "no perf on this machine"
fi
