#!/bin/bash
# On the device machine, one call: build coil, then bench/probes/row_passes.cpp (16 threads),
# bench/compare_torch.py (coil, PyTorch eager and Inductor side by side) and coil-micro, each
# into $OUT. The last is cut off where the call's time would run out.
set -euo pipefail
source bench/device_setup.sh
g++ -O3 -march=native -fopenmp bench/probes/row_passes.cpp -o /tmp/row_passes
OMP_NUM_THREADS=${THREADS:-16} /tmp/row_passes 2>&1 | tee "$OUT/row_passes.txt"
export PYTHONUNBUFFERED=1
python3 bench/compare_torch.py --coil-bench build-device/bench/coil-bench --threads "${THREADS:-16}" \
  --json "$OUT/compare_cpu.json" 2>&1 | tee "$OUT/compare_cpu.txt"
timeout "${MICRO_SECONDS:-90}" build-device/bench/coil-micro --threads "${THREADS:-16}" 2>&1 |
  tee "$OUT/micro.txt" || true
