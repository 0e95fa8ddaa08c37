#!/usr/bin/env bash
# On the device machine: mode="reduce-overhead" (CUDA graphs). Builds the tests and benchmarks,
# runs the CUDA-graph tests, the per-call overhead benchmarks on the GPU (coil_bench_overhead),
# the bare CUDA costs without coil (bench/probes/cuda_graph_host_cost.cu), then the workloads
# side by side with torch.compile(mode="reduce-overhead") unless COIL_SKIP_COMPARE=1. Results
# land in $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/cuda/bin:$PATH
COIL_SKIP_BUILD=1 source bench/device_setup.sh  # the Debian packages from .deps/
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCOIL_BUILD_EXAMPLES=ON \
  -DCOIL_BUILD_BENCH=ON > "$OUT/cmake.log" 2>&1 || { tail -30 "$OUT/cmake.log"; exit 1; }
ninja -C build-gpu coil_tests coil_bench_overhead coil-bench > "$OUT/build.log" 2>&1 ||
  { grep -E "error|FAILED" -A5 "$OUT/build.log" | head -40; exit 1; }
echo "== CUDA tests (COIL_GPU_FILTER, else the CUDA graph tests)"
build-gpu/tests/coil_tests --gtest_filter="${COIL_GPU_FILTER:-CudaGraphs*}" 2>&1 | tail -6
echo "== per-call host time"
build-gpu/bench/coil_bench_overhead --benchmark_filter='Cuda' --benchmark_repetitions=3 \
  --benchmark_report_aggregates_only=true 2>&1 | grep -E "median|Benchmark"
echo "== the same without coil"
nvcc -O2 -o /tmp/cuda_graph_host_cost bench/probes/cuda_graph_host_cost.cu && /tmp/cuda_graph_host_cost
[ "${COIL_SKIP_COMPARE:-0}" = 1 ] && exit 0
echo "== workloads, mode reduce-overhead on both sides"
python3 bench/compare_torch.py --coil-bench build-gpu/bench/coil-bench --device cuda \
  --mode reduce-overhead --json "$OUT/compare_reduce_overhead.json" 2>&1 | tail -13
