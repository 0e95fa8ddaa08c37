#!/usr/bin/env bash
# On the device machine: chosen workloads side by side with PyTorch (eager and torch.compile),
# without TF32 on either side. Usage: device_compare.sh DEVICES WORKLOAD (a part of the name), e.g.
# `device_compare.sh "cuda cpu" conv_block` (coil's cuDNN calls on the GPU, its im2col + GEMM
# against oneDNN on the 16 CPU cores) or `device_compare.sh cuda attention`. EACH=1 runs every
# workload (or every one the filter names) in a process of its own on both sides: Inductor's
# times of a workload measured after the others in one process have come out up to four times
# the same workload's alone (bn_relu 0.069 against 0.017 ms). Results land in $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
devices=${1:-cuda}
filter=${2:-}
COIL_SKIP_BUILD=1 source bench/device_setup.sh  # the Debian packages from .deps/
set +e
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCOIL_BUILD_EXAMPLES=ON \
  -DCOIL_BUILD_BENCH=ON > "$OUT/cmake.log" 2>&1 || { tail -30 "$OUT/cmake.log"; exit 1; }
ninja -C build-gpu coil-bench > "$OUT/build.log" 2>&1 ||
  { grep -E "error|FAILED" -A5 "$OUT/build.log" | head -40; exit 1; }
workloads="sincos softmax mm_softmax layernorm_gelu mlp attention bn_relu instance_norm
  long_rows_sum conv_block train_mlp"
for device in $devices; do
  if [ "${EACH:-0}" = 1 ]; then
    for w in $workloads; do
      [[ $w == *"$filter"* ]] || continue
      echo "== $w on $device"
      python3 bench/compare_torch.py --coil-bench build-gpu/bench/coil-bench --device $device \
        --filter "=$w" --json "$OUT/compare_${device}_$w.json" 2>&1 | grep -A2 "^workload"
    done
    continue
  fi
  echo "== $filter on $device"
  python3 bench/compare_torch.py --coil-bench build-gpu/bench/coil-bench --device $device \
    --filter "$filter" --json "$OUT/compare_$device.json" 2>&1 | tail -12
done
