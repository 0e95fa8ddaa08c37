#!/bin/bash
# On the device machine: bench/probes/attention_block_ab.cpp with coil's attention kernel and
# with each variant of its source given as an argument, the binaries taking turns for ROUNDS
# rounds at 16 threads; CONFIGS adds runs of coil's kernel under other block sizes and
# schedules ("ROWS:SCHEDULE" pairs, e.g. "64:dynamic 32:dynamic"). SCALING=1 then times coil's
# kernel one block per thread at 1, 2, 4, ... threads, with each core's clock.
set -euo pipefail
bins=()
for src in src/runtime/kernels/attention_block.cpp "$@"; do
  bin=/tmp/ab_$(basename "$src" .cpp)
  g++ -O3 -march=native -fopenmp -std=c++20 -I src -I include bench/probes/attention_block_ab.cpp "$src" -o "$bin"
  bins+=("$bin")
done
for r in $(seq "${ROUNDS:-5}"); do
  for b in "${bins[@]}"; do OMP_NUM_THREADS=${THREADS:-16} "$b" "$(basename "$b")"; done
  for c in ${CONFIGS:-}; do
    ROWS=${c%%:*} OMP_SCHEDULE=${c##*:} OMP_NUM_THREADS=${THREADS:-16} "${bins[0]}" "rows_$c"
  done
done 2>&1 | tee "$OUT/attention_block_ab.txt"
if [ "${SCALING:-0}" = 1 ]; then
  OMP_NUM_THREADS=${THREADS:-16} "${bins[0]}" kernel --scaling 2>&1 | tee -a "$OUT/attention_block_ab.txt"
fi
