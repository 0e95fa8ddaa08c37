#!/bin/bash
# On the device machine: which OpenBLAS kernel does the generic "Intel Xeon Processor" CPUID
# get, and what does forcing a core type change? (coil-bench's BLAS rate and the matmul rows.)
set -uo pipefail
grep -o 'avx512[a-z_]*\|amx[a-z_]*' /proc/cpuinfo | sort -u | tr '\n' ' '; echo
for core in "" SkylakeX Cooperlake Haswell; do
  echo "== OPENBLAS_CORETYPE=${core:-<auto>}"
  OPENBLAS_VERBOSE=2 OPENBLAS_CORETYPE=$core build-device/bench/coil-bench --threads 16 \
    --filter m 2>&1 | grep -v "^$" | head -8
done
