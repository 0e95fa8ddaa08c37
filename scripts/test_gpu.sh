#!/usr/bin/env bash
# The GPU suite, on a machine with an NVIDIA GPU and the CUDA toolkit (the device machine, which
# has no package registry: the Debian packages coil builds with travel in .deps/, see
# bench/device_setup.sh). Builds coil with its tests, then runs the CUDA tests (every registry
# op eager and compiled on the GPU against the CPU, the random-program fuzzer, compiled training)
# and, unless COIL_GPU_QUICK=1, the whole suite and (unless COIL_GPU_SANITIZER=0) the CUDA tests
# once more under compute-sanitizer (the tests at model sizes and tile edges among them:
# tests/cuda/test_cuda_model_sizes.cpp, test_cuda_kernel_sizes.cpp, the fuzzer's model-size
# mode). COIL_GPU_FILTER picks the tests of a quick run;
# COIL_GPU_STEPS (default "cuda suite sanitizer") names the steps to run, so that a run too long
# for one call can be split over two on a warm machine. Logs go to $OUT when it is set; it fails
# when any step did.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp}
# PREBUILT=1: the binaries built on the development machine and carried in build/ (as
# bench/device_prebuilt.sh says) instead of a build here; the suite is then coil_tests alone, in
# one shard per core (ctest's files and the examples are not carried).
deps=.deps
if [ "${PREBUILT:-0}" = 1 ]; then
  deps=.deps-run B=build
  ln -sf libcoil.so.0.1.0 build/libcoil.so.0
  export LD_LIBRARY_PATH=$PWD/build${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  # The tests find their data under the source folder they were built in (COIL_BUILT_IN).
  src=${COIL_BUILT_IN:-/work/main}
  [ "$src" != "$PWD" ] && mkdir -p "$(dirname "$src")" && ln -sfn "$PWD" "$src"
fi
if [ -d $deps ]; then
  for f in $deps/*.deb; do dpkg -x "$f" /tmp/debroot; done
  cp -rn /tmp/debroot/usr/include/* /usr/include/ 2>/dev/null || true
  cp -rn /tmp/debroot/usr/lib/x86_64-linux-gnu/* /usr/lib/x86_64-linux-gnu/ 2>/dev/null || true
  cp -rn /tmp/debroot/usr/share/* /usr/share/ 2>/dev/null || true
  cp -rn /tmp/debroot/usr/src/* /usr/src/ 2>/dev/null || true
  ln -sf /usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so.0 /usr/lib/x86_64-linux-gnu/libopenblas.so.0 || true
  ldconfig
fi
# The digits the training example learns: from the scikit-learn that the machine's Python has,
# where there is no Debian package to take it from (scripts/fetch_digits.sh elsewhere).
if [ ! -s data/digits.csv ]; then
  sk=$(python3 -c 'import sklearn, os; print(os.path.dirname(sklearn.__file__))' 2>/dev/null || true)
  if [ -f "$sk/datasets/data/digits.csv.gz" ]; then
    mkdir -p data && gunzip -c "$sk/datasets/data/digits.csv.gz" > data/digits.csv
  else
    bash scripts/fetch_digits.sh || true
  fi
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
if [ -z "${B:-}" ]; then
  B=build-gpu
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCOIL_BUILD_EXAMPLES=ON \
    -DCOIL_BUILD_BENCH=ON > "$out/cmake.log" 2>&1 || { tail -40 "$out/cmake.log"; exit 1; }
  grep "coil:" "$out/cmake.log"
  # COIL_GPU_TARGET=coil_tests builds only what the CUDA tests need (a quick run).
  ninja -C build-gpu ${COIL_GPU_TARGET:-} > "$out/build.log" 2>&1 ||
    { grep -E "error|FAILED" -A5 "$out/build.log" | head -60; exit 1; }
fi
status=0
steps=" ${COIL_GPU_STEPS:-cuda suite sanitizer} "
[ "${COIL_GPU_QUICK:-0}" = 1 ] && steps=" cuda "
[ "${COIL_GPU_SANITIZER:-1}" = 0 ] && steps=${steps/ sanitizer / }
if [[ $steps == *" cuda "* ]]; then
  echo "== CUDA tests"
  $B/tests/coil_tests --gtest_filter="${COIL_GPU_FILTER:-Cuda*:*OnCuda*:ShippedKernels.*:MaxAutotune.*}" 2>&1 |
    tee "$out/cuda_tests.txt" || status=1
fi
if [[ $steps == *" suite "* ]]; then
  echo "== the whole suite, on the GPU machine"
  if [ $B = build ]; then
    shards=$(nproc)
    for i in $(seq 0 $((shards - 1))); do
      GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i build/tests/coil_tests > "$out/shard_$i.txt" 2>&1 &
    done
    wait
    cat "$out"/shard_*.txt > "$out/ctest.txt" && rm "$out"/shard_*.txt
    grep -E "^\[  (PASSED|FAILED) " "$out/ctest.txt" | sort | uniq -c
    ! grep -q "^\[  FAILED  \]" "$out/ctest.txt" || status=1
    # ctest's four example runs (the GPU pair, then the CPU pair).
    for device in cuda cpu; do
      build/examples/coil_example_train_digits --device $device data/digits.csv > "$out/example_digits_$device.txt" 2>&1 &&
        build/examples/coil_example_train_transformer --device $device README.md 100 > "$out/example_transformer_$device.txt" 2>&1 ||
        { echo "an example failed on $device"; status=1; }
    done
  else
    (cd build-gpu && ctest -j 16 --output-on-failure) > "$out/ctest.txt" 2>&1 || status=1
    tail -40 "$out/ctest.txt"
  fi
fi
[[ $steps == *" sanitizer "* ]] || exit $status
echo "== the CUDA tests under compute-sanitizer (memcheck; racecheck for the block reductions and the attention tiles)"
# Without the caching allocator every tensor is a cudaMalloc of its own, so an access past its
# end is caught; CUDA graphs need the allocator (a capture cannot free), so they run apart,
# where the failed captures one test provokes on purpose are not counted as errors.
COIL_CUDA_NO_CACHE=1 compute-sanitizer --tool memcheck --error-exitcode 1 \
  $B/tests/coil_tests \
  --gtest_filter="${COIL_GPU_FILTER:-Cuda*:*OnCuda*:ShippedKernels.*}:-Cuda.AllocatorStatistics*:Cuda.OutOfMemory*:CudaGraphs*" \
  2>&1 | tail -30 | tee "$out/memcheck.txt" || status=1
compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 1 \
  $B/tests/coil_tests --gtest_filter='CudaGraphs*' 2>&1 | tail -12 | tee "$out/memcheck_graphs.txt" || status=1
compute-sanitizer --tool racecheck --error-exitcode 1 \
  $B/tests/coil_tests --gtest_filter='Cuda.CompiledFunctionsMatchTheCpu:Cuda.RowsInRegistersMatchTheCpu:Cuda.AttentionRunsInOneKernel' \
  2>&1 | tail -20 |
  tee "$out/racecheck.txt" || status=1
exit $status
