#!/bin/bash
# On the device machine: build coil, then attention alone, three coil-bench runs (time, lib %,
# cold and warm first calls) and coil-micro's pieces, at 16 threads.
set -euo pipefail
source bench/device_setup.sh
for i in 1 2 3; do
  build-device/bench/coil-bench --threads 16 --filter attention --json "$OUT/attention_$i.json"
done 2>&1 | tee "$OUT/attention.txt"
build-device/bench/coil-micro --threads 16 2>&1 | tee "$OUT/micro.txt"
