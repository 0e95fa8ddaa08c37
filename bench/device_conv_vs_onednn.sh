#!/bin/bash
# On the device machine's 16 cores: ResNet-50's convolutions through coil against oneDNN's bare
# primitives (bench/probes/conv_vs_onednn.cpp), batch 16 as coil-bench-models' inference.
set -uo pipefail
COIL_SKIP_BUILD=1 source bench/device_setup.sh
cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release -DCOIL_BUILD_TESTS=OFF \
  -DCOIL_BUILD_EXAMPLES=OFF -DCOIL_BUILD_BENCH=OFF -DCOIL_WITH_CUDA=OFF > "$OUT/cmake.log" 2>&1 ||
  { tail -30 "$OUT/cmake.log"; exit 1; }
ninja -C build-device coil > "$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
g++ -std=c++20 -O2 -fopenmp -Iinclude bench/probes/conv_vs_onednn.cpp -Lbuild-device -lcoil \
  -ldnnl -Wl,-rpath,"$PWD/build-device" -o /tmp/conv_vs_onednn || exit 1
/tmp/conv_vs_onednn "${1:-16}" | tee "$OUT/conv_vs_onednn.txt"
