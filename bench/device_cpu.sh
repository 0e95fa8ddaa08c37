#!/bin/bash
# On the device machine: build coil (bench/device_setup.sh) and run bench/compare_torch.py,
# coil next to PyTorch eager and torch.compile. Results land in $OUT.
set -euo pipefail
source bench/device_setup.sh
[ "${PROBE_ONLY:-0}" = 1 ] && exec bash bench/device_blas_probe.sh
[ "${MICRO_ONLY:-0}" = 1 ] && exec build-device/bench/coil-micro --threads "${THREADS:-16}"
export PYTHONUNBUFFERED=1
python3 bench/compare_torch.py --coil-bench build-device/bench/coil-bench --threads "${THREADS:-16}" \
  --json "$OUT/compare_cpu.json" "$@" 2>&1 | tee "$OUT/compare_cpu.txt"
