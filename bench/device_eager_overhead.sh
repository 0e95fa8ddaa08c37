#!/bin/bash
# On the device machine, one call: the host cost of eager GPU ops (coil_bench_overhead's CUDA
# benchmarks) at two versions of coil, base and head, in turns. The base travels as a tarball
# made here: `mkdir -p .ab && git archive BASE > .ab/base.tar`, with `.ab` and `.deps` carried.
# Results land in $OUT/overhead.txt.
set -euo pipefail
COIL_SKIP_BUILD=1 source bench/device_setup.sh
build() {
  (cd "$1" && cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCOIL_BUILD_TESTS=OFF -DCOIL_BUILD_EXAMPLES=OFF > "/tmp/cmake_$2.log" 2>&1 &&
    ninja -C build-device coil_bench_overhead > "/tmp/build_$2.log" 2>&1) ||
    { tail -30 "/tmp/cmake_$2.log" "/tmp/build_$2.log"; return 1; }
}
rm -rf /tmp/base && mkdir -p /tmp/base && tar -xf .ab/base.tar -C /tmp/base
cp bench/overhead.cpp /tmp/base/bench/overhead.cpp  # the same benchmarks (public API only)
build /tmp/base base & base=$!
build . head & head=$!
wait "$base" && wait "$head"
export COIL_CACHE_DIR=/tmp/coil-cache-bench  # cold at the first round, as a new program's
for round in ${ROUNDS:-1 2}; do
  for side in base head; do
    dir=.
    [ "$side" = base ] && dir=/tmp/base
    echo "== round $round: $side" | tee -a "$OUT/overhead.txt"
    "$dir/build-device/bench/coil_bench_overhead" --benchmark_filter=Cuda 2>&1 |
      grep -E "^BM_|^-|^Benchmark" | tee -a "$OUT/overhead.txt"
  done
done
