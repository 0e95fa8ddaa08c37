#!/bin/bash
# On the device machine: where a cold first call's time goes. The compile timeline of sincos
# and softmax with an empty code cache, then the system compiler alone on sincos's generated
# source: compiling, and linking with the default linker and with gold.
set -euo pipefail
source bench/device_setup.sh
g++ --version | head -1
for w in sincos softmax; do
  export COIL_CACHE_DIR=$(mktemp -d)
  COIL_LOGS=timeline build-device/bench/coil-bench --filter $w --threads 16 2>&1 |
    grep -E "timeline|^$w " | head -4
done
export COIL_CACHE_DIR=$(mktemp -d)
build-device/bench/coil-bench --probe sincos > /dev/null
src=$(ls "$COIL_CACHE_DIR"/*/*.cpp | head -1)
flags="-O3 -march=native -fopenmp -fPIC -std=c++17 -fno-math-errno -fno-trapping-math"
for i in 1 2 3; do
  /usr/bin/time -f "compile only: %e s" g++ $flags -c "$src" -o /tmp/k.o
  /usr/bin/time -f "link, default linker: %e s" g++ -shared -fopenmp /tmp/k.o -o /tmp/k.so -lsleef -lm
  /usr/bin/time -f "link, gold: %e s" g++ -shared -fopenmp -fuse-ld=gold /tmp/k.o -o /tmp/k.so -lsleef -lm
  /usr/bin/time -f "cc1plus with -O1: %e s" g++ ${flags/-O3/-O1} -c "$src" -o /tmp/k1.o
done
