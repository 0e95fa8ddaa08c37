#!/usr/bin/env bash
# On the device machine, mode="max-autotune" on both sides: builds coil's tests and coil-bench
# (build-gpu/), runs the autotune tests and (unless SANITIZER=0) the CUDA tests under
# compute-sanitizer, then coil-bench on the GPU in the default mode and in max-autotune (every
# workload, one process each), then compare_torch.py --mode MODE (default max-autotune-no-cudagraphs: CUDA graphs copy
# each input into a static buffer, which doubles a memory-bound workload's traffic) for COMPARE, each
# workload in a process of its own (Inductor's max-autotune benchmarks Triton configs and
# cuBLAS/Triton products for every kernel: minutes for the whole set). Prints as it goes: call
# it without `| tail`.
set -uo pipefail
cd "$(dirname "$0")/.."
PROBE=0 WORKLOADS=" " COMPARE=" " COIL_GPU_FILTER="MaxAutotune.*" TEST_LIMIT=120 \
  bash bench/device_quick.sh
SECONDS=0
if [ "${SANITIZER:-1}" = 1 ]; then
  COIL_GPU_TARGET=coil_tests COIL_GPU_STEPS=sanitizer bash scripts/test_gpu.sh > /tmp/san.txt 2>&1
  echo "== sanitizer rc=$? at $SECONDS s"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" /tmp/san.txt
fi
for mode in ${MODES:-default max-autotune-no-cudagraphs}; do
  echo "== coil-bench --mode $mode (at $SECONDS s)"
  timeout 150 build-gpu/bench/coil-bench --device cuda --mode $mode \
    --json "$OUT/coil_bench_$mode.json" 2>&1 | grep -vE "^ *$"
done
echo "== compare_torch --mode ${MODE:-max-autotune-no-cudagraphs} (at $SECONDS s)"
for w in ${COMPARE:-softmax long_rows_sum layernorm_gelu instance_norm mm_softmax}; do
  timeout 200 python3 bench/compare_torch.py --coil-bench build-gpu/bench/coil-bench \
    --device cuda --mode ${MODE:-max-autotune-no-cudagraphs} --filter "=$w" --json "$OUT/compare_autotune_$w.json" 2>&1 |
    grep -A2 "^workload  *inductor"
  echo "   ($w done at $SECONDS s)"
done
