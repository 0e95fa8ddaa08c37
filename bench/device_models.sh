#!/usr/bin/env bash
# On the device machine: ResNet-50 and GPT-2 small, coil against PyTorch eager and Inductor
# (bench/compare_models.py). Usage: device_models.sh DEVICES [MODEL] [--quick], e.g.
# `device_models.sh "cuda cpu"` or `device_models.sh cpu gpt2 --quick`. Results land in $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
devices=${1:-cuda}
model=${2:-}
quick=${3:-}
COIL_SKIP_BUILD=1 source bench/device_setup.sh  # the Debian packages from .deps/
set +e
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCOIL_BUILD_EXAMPLES=ON \
  -DCOIL_BUILD_BENCH=ON > "$OUT/cmake.log" 2>&1 || { tail -30 "$OUT/cmake.log"; exit 1; }
ninja -C build-gpu coil-bench-models > "$OUT/build.log" 2>&1 ||
  { grep -E "error|FAILED" -A5 "$OUT/build.log" | head -40; exit 1; }
for device in $devices; do
  echo "== models on $device"
  python3 -u bench/compare_models.py --coil-bench-models build-gpu/bench/coil-bench-models \
    --device "$device" ${model:+--model "$model"} $quick --json "$OUT/models_$device.json" 2>&1 |
    grep -v "^\s*$" | tail -24
done
