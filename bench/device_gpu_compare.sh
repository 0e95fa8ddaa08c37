#!/usr/bin/env bash
# On the device machine (GPU, PyTorch): coil and PyTorch (eager and torch.compile) side by side
# on the GPU at the GPU sizes, the eager GPU ops that compile or fall back to the CPU in the
# training step, and the transformer example trained on the GPU. Results land in $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
COIL_SKIP_BUILD=1 source bench/device_setup.sh  # the Debian packages from .deps/
set +e
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCOIL_BUILD_TESTS=OFF \
  -DCOIL_BUILD_EXAMPLES=ON -DCOIL_BUILD_BENCH=ON > "$OUT/cmake.log" 2>&1 || { tail -30 "$OUT/cmake.log"; exit 1; }
ninja -C build-gpu coil-bench coil_example_train_transformer > "$OUT/build.log" 2>&1 ||
  { grep -E "error|FAILED" -A5 "$OUT/build.log" | head -40; exit 1; }
echo "== the eager GPU ops of one training step"
COIL_LOGS=device_eager build-gpu/bench/coil-bench --device cuda --filter train_mlp 2> "$OUT/device_eager.log" |
  tail -3
grep -o "^\[device_eager\] [a-z_0-9]* [a-z]* [a-z]*" "$OUT/device_eager.log" | sort | uniq -c | sort -rn | head -20
echo "== the transformer example on the GPU"
(time build-gpu/examples/coil_example_train_transformer --device cuda) > "$OUT/transformer.txt" 2>&1
tail -8 "$OUT/transformer.txt"
echo "== side by side"
python3 bench/compare_torch.py --coil-bench build-gpu/bench/coil-bench --device cuda \
  --json "$OUT/compare_cuda.json" 2>&1 | tail -14
