#!/usr/bin/env bash
# On the device machine: the GPU kernels of one call of each coil-bench workload in WORKLOADS,
# coil compiled (and eager with EAGER=1) under Nsight Compute (bench/probes/workload_kernels.cpp)
# and PyTorch eager and Inductor under torch.profiler (bench/probes/torch_workload_kernels.py),
# each kernel with its device time, so that a workload's gap to Inductor is put on a kernel.
# Usage: WORKLOADS="mm_softmax long_rows_sum" bench/device_workload_kernels.sh
set -uo pipefail
cd "$(dirname "$0")/.."
COIL_SKIP_BUILD=1 source bench/device_setup.sh
set +e
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCOIL_BUILD_BENCH=ON \
  -DCOIL_BUILD_TESTS=OFF > "$OUT/cmake.log" 2>&1 || { tail -30 "$OUT/cmake.log"; exit 1; }
ninja -C build-gpu coil > "$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
g++ -std=c++20 -O2 -Iinclude -I/usr/local/cuda/include bench/probes/workload_kernels.cpp \
  bench/workloads.cpp -Lbuild-gpu -lcoil -L/usr/local/cuda/lib64 -lcudart \
  -Wl,-rpath,"$PWD/build-gpu" -o /tmp/workload_kernels || exit 1
modes="compiled"
[ "${EAGER:-0}" = 1 ] && modes="compiled eager"
for w in ${WORKLOADS:-mm_softmax long_rows_sum}; do
  for mode in $modes; do
    /tmp/workload_kernels "$w" $mode > /dev/null  # fills the code cache: ncu sees no compiles
    /usr/local/cuda/bin/ncu --profile-from-start off --clock-control none --cache-control none \
      --metrics gpu__time_duration.sum --csv /tmp/workload_kernels "$w" $mode \
      > "$OUT/coil_${w}_$mode.csv" 2> "$OUT/ncu_${w}_$mode.log"
    python3 bench/probes/kernel_table.py "$OUT/coil_${w}_$mode.csv" 12
  done
  for side in eager inductor; do
    timeout 120 python3 bench/probes/torch_workload_kernels.py "$w" $side 2>&1 | grep -v -i warn
  done
done
