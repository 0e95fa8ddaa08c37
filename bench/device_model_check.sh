#!/bin/bash
# On the device machine, in one call: the CUDA tests that a change to the GPU's code generation
# or library calls must pass (a quick filter of scripts/test_gpu.sh), one model on the GPU
# (coil-bench-models --quick; MODEL=gpt2 or resnet50, gpt2 by default), and the kernel table of
# one compiled training step of it under Nsight Compute with unlocked clocks (as
# bench/device_train_kernels.sh). $OUT gets the logs and CSV.
set -uo pipefail
model=${MODEL:-gpt2}
COIL_GPU_QUICK=1 COIL_GPU_TARGET=coil_tests \
  COIL_GPU_FILTER=${COIL_GPU_FILTER:-'Cuda*:*OnCuda*:CudaGraphs*:MaxAutotune*:CompiledOptim*:Gpt2*:CudaCodegen*:Tf32*'} \
  bash scripts/test_gpu.sh 2>&1 | tail -8
ninja -C build-gpu coil-bench-models > "$OUT/bench_build.log" 2>&1 || { tail -20 "$OUT/bench_build.log"; exit 1; }
build-gpu/bench/coil-bench-models --device cuda --model "$model" --quick --json "$OUT/$model.json" 2>&1 | tail -4
g++ -std=c++20 -O2 -Iinclude -I/usr/local/cuda/include bench/probes/train_step.cpp \
  -Lbuild-gpu -lcoil -L/usr/local/cuda/lib64 -lcudart -Wl,-rpath,"$PWD/build-gpu" \
  -o /tmp/train_step || exit 1
/tmp/train_step "$model" compiled > /dev/null  # fills the code cache: ncu sees no compiles
/usr/local/cuda/bin/ncu --profile-from-start off --clock-control none --metrics gpu__time_duration.sum \
  --csv --cache-control none /tmp/train_step "$model" compiled > "$OUT/coil_compiled.csv" 2> "$OUT/ncu.log"
python3 bench/probes/kernel_table.py "$OUT/coil_compiled.csv" ${ROWS:-20}
