#!/bin/bash
# On the device machine, one call: coil-bench at two versions of coil in turns (base, head,
# base, head), so that a change's effect can be told from run-to-run noise. The base travels as
# a tarball made here: `mkdir -p .ab && git archive BASE > .ab/base.tar`, with `.ab` and
# `.deps` (bench/device_setup.sh) carried. Results land in $OUT: base_N.json, head_N.json and
# ab.txt (both tables of each round).
set -euo pipefail
threads=${THREADS:-16}
source bench/device_setup.sh  # builds this tree into build-device/
rm -rf /tmp/base && mkdir -p /tmp/base && tar -xf .ab/base.tar -C /tmp/base
(cd /tmp/base && cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCOIL_BUILD_TESTS=OFF -DCOIL_BUILD_EXAMPLES=OFF > /tmp/base-cmake.log 2>&1 &&
  ninja -C build-device coil-bench > /tmp/base-build.log 2>&1) ||
  { tail -30 /tmp/base-cmake.log /tmp/base-build.log; exit 1; }
for round in ${ROUNDS:-1 2}; do
  for side in base head; do
    bin=build-device/bench/coil-bench
    [ "$side" = base ] && bin=/tmp/base/build-device/bench/coil-bench
    echo "== round $round: $side" | tee -a "$OUT/ab.txt"
    "$bin" --threads "$threads" --json "$OUT/${side}_$round.json" 2>&1 | tee -a "$OUT/ab.txt"
  done
done
