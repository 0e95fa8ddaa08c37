#!/bin/bash
# On the device machine: where GPT-2's compiled decode step spends its time at batch 1
# (bench/probes/decode_step.cpp): eager against compiled per token, then coil-bench-models'
# GPT-2 rows.
# Results land in $OUT.
set -uo pipefail
COIL_SKIP_BUILD=1 source bench/device_setup.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCOIL_BUILD_BENCH=ON \
  -DCOIL_BUILD_TESTS=OFF > "$OUT/cmake.log" 2>&1 || { tail -30 "$OUT/cmake.log"; exit 1; }
ninja -C build-gpu coil coil-bench-models > "$OUT/build.log" 2>&1 ||
  { grep -E "error|FAILED" -A5 "$OUT/build.log" | head -40; exit 1; }
g++ -std=c++20 -O2 -Iinclude bench/probes/decode_step.cpp -Lbuild-gpu -lcoil \
  -Wl,-rpath,"$PWD/build-gpu" -o /tmp/decode_step || exit 1
/tmp/decode_step eager 3
/tmp/decode_step compiled 3
build-gpu/bench/coil-bench-models --device cuda --model gpt2 --quick --json "$OUT/gpt2_cuda.json"
