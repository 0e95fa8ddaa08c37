#!/bin/bash
# Sourced by the device scripts (16 CPU cores, PyTorch 2.11, no package registry): unpack the
# Debian packages carried in .deps/ (fetched here with `apt-get download`, see
# docs/performance.md) and build coil's benchmarks into build-device/.
set -euo pipefail
# COIL_DEPS: another folder of them, such as .deps-run/ (the run-time libraries alone, for
# binaries built elsewhere: bench/device_prebuilt.sh).
for f in "${COIL_DEPS:-.deps}"/*.deb; do dpkg -x "$f" /tmp/debroot; done
cp -rn /tmp/debroot/usr/include/* /usr/include/ 2>/dev/null || true
cp -rn /tmp/debroot/usr/lib/x86_64-linux-gnu/* /usr/lib/x86_64-linux-gnu/ 2>/dev/null || true
cp -rn /tmp/debroot/usr/share/* /usr/share/ 2>/dev/null || true
# Debian's alternatives would point libopenblas.so and cblas.h at the OpenMP build.
ln -sf /usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so.0 /usr/lib/x86_64-linux-gnu/libopenblas.so.0 || true
ldconfig
[ "${COIL_SKIP_BUILD:-0}" = 1 ] && return 0  # the libraries alone, for the probes
cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release -DCOIL_BUILD_TESTS=OFF \
  -DCOIL_BUILD_EXAMPLES=OFF > "$OUT/cmake.log" 2>&1 || { tail -30 "$OUT/cmake.log"; exit 1; }
ninja -C build-device coil-bench coil-micro > "$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
