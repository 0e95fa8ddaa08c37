#!/bin/bash
# On the device machine: every GPU kernel of one training step (GPT-2 small at 8 x 512 with
# AdamW, or ResNet-50 at 32 x 224² with SGD; TF32 off), summed by name — coil eager and compiled
# under Nsight Compute (bench/probes/train_step.cpp), PyTorch eager and Inductor under
# torch.profiler (bench/probes/torch_train_kernels.py).
# Usage: MODEL=gpt2|resnet50 device_train_kernels.sh [coil] [torch]. $OUT gets the CSVs.
# Nsight Compute runs with --clock-control none: its default locks the GPU's clocks to their
# base, which made every kernel about 1.3x slower than torch.profiler's (unlocked) times of the
# same kernels.
set -uo pipefail
COIL_SKIP_BUILD=1 source bench/device_setup.sh
sides=${*:-coil torch}
model=${MODEL:-gpt2}
if [[ $sides == *coil* ]]; then
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCOIL_BUILD_BENCH=ON \
    -DCOIL_BUILD_TESTS=OFF > "$OUT/cmake.log" 2>&1 || { tail -30 "$OUT/cmake.log"; exit 1; }
  ninja -C build-gpu coil > "$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
  g++ -std=c++20 -O2 -Iinclude -I/usr/local/cuda/include bench/probes/train_step.cpp \
    -Lbuild-gpu -lcoil -L/usr/local/cuda/lib64 -lcudart -Wl,-rpath,"$PWD/build-gpu" \
    -o /tmp/train_step || exit 1
  for mode in ${COIL_MODES:-eager compiled}; do
    /tmp/train_step "$model" $mode > /dev/null  # fills the code cache: ncu sees no compiles
    /usr/local/cuda/bin/ncu --profile-from-start off --clock-control none --metrics gpu__time_duration.sum --csv \
      --cache-control none /tmp/train_step "$model" $mode > "$OUT/coil_${model}_$mode.csv" 2> "$OUT/ncu_$mode.log"
    python3 bench/probes/kernel_table.py "$OUT/coil_${model}_$mode.csv" ${ROWS:-25}
  done
fi
if [[ $sides == *torch* ]]; then
  for mode in eager inductor; do
    python3 bench/probes/torch_train_kernels.py "$model" $mode 2>&1 | tail -$((${ROWS:-25} + 2))
  done
fi
