#!/usr/bin/env bash
# On the device machine: the convolution block (relu(batch_norm(conv2d(x, w, padding=1)))) side
# by side with PyTorch, on the GPU (coil's cuDNN calls; both sides without TF32) and on the 16
# CPU cores (coil's im2col + GEMM against oneDNN's convolution). Results land in $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
COIL_SKIP_BUILD=1 source bench/device_setup.sh  # the Debian packages from .deps/
set +e
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCOIL_BUILD_EXAMPLES=ON \
  -DCOIL_BUILD_BENCH=ON > "$OUT/cmake.log" 2>&1 || { tail -30 "$OUT/cmake.log"; exit 1; }
ninja -C build-gpu coil-bench > "$OUT/build.log" 2>&1 ||
  { grep -E "error|FAILED" -A5 "$OUT/build.log" | head -40; exit 1; }
for device in cuda cpu; do
  echo "== conv_block on $device"
  python3 bench/compare_torch.py --coil-bench build-gpu/bench/coil-bench --device $device \
    --filter conv_block --json "$OUT/conv_block_$device.json" 2>&1 | tail -6
done
