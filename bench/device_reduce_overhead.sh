#!/usr/bin/env bash
# On the device machine, with prebuilt binaries (bench/device_prebuilt.sh's carry): every
# float32 workload side by side with PyTorch in the default mode and in mode="reduce-overhead"
# (CUDA graphs on both sides; coil's graph reads inputs of a megabyte and more where they are),
# then the workloads in bfloat16 (16-bit row kernels). Results under $OUT.
cd "$(dirname "$0")/.."
bash bench/device_prebuilt.sh \
  "build/tests/coil_tests --gtest_filter='CudaGraphs*' 2>&1 | tail -4" \
  "python3 bench/compare_torch.py --coil-bench build/bench/coil-bench --device cuda \
--json '$OUT/compare_default.json' 2>&1 | tail -14" \
  "python3 bench/compare_torch.py --coil-bench build/bench/coil-bench --device cuda \
--mode reduce-overhead --json '$OUT/compare_reduce_overhead.json' 2>&1 | tail -14" \
  "python3 bench/compare_torch.py --coil-bench build/bench/coil-bench --device cuda \
--dtype bfloat16 --json '$OUT/compare_bf16.json' 2>&1 | tail -14"
