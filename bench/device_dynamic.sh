#!/usr/bin/env bash
# On the device machine: every workload compiled static and with dynamic=true (graphs over size
# symbols, kernels taking their sizes at run time), on its 16 CPU cores and on the GPU, for
# docs/performance.md's dynamic-shapes table. Results (tables and JSON) land in $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
for f in .deps/*.deb; do dpkg -x "$f" /tmp/debroot; done
cp -rn /tmp/debroot/usr/include/* /usr/include/ 2>/dev/null || true
cp -rn /tmp/debroot/usr/lib/x86_64-linux-gnu/* /usr/lib/x86_64-linux-gnu/ 2>/dev/null || true
ln -sf /usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so.0 /usr/lib/x86_64-linux-gnu/libopenblas.so.0
ldconfig
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCOIL_BUILD_EXAMPLES=ON \
  -DCOIL_BUILD_BENCH=ON > "$OUT/cmake.log" 2>&1 || { tail -30 "$OUT/cmake.log"; exit 1; }
ninja -C build-gpu coil-bench > "$OUT/build.log" 2>&1 ||
  { grep -E "error|FAILED" -A5 "$OUT/build.log" | head -40; exit 1; }
for mode in static dynamic; do
  flag=$([ $mode = dynamic ] && echo --dynamic)
  echo "== CPU, $mode"
  build-gpu/bench/coil-bench --threads 16 $flag --json "$OUT/cpu_$mode.json" 2>&1 | tail -11
  echo "== GPU, $mode"
  build-gpu/bench/coil-bench --device cuda $flag --json "$OUT/cuda_$mode.json" 2>&1 | tail -11
done
