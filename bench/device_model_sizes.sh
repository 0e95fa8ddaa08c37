#!/usr/bin/env bash
# On the device machine, with the binaries carried from the development machine (as
# bench/device_prebuilt.sh says): the compiled training of a GPT-2 block at model sizes
# (tests/cuda/test_cuda_model_sizes.cpp), each size in a process of its own (a fault ends the
# process), then the first size of each dtype under compute-sanitizer's memcheck without the
# caching allocator, so that a read past a tensor's end is reported against that tensor. The
# tests whose names match COIL_MODEL_SIZES_LOGS (a grep pattern) write their output code to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
COIL_DEPS=.deps-run COIL_SKIP_BUILD=1 source bench/device_setup.sh
set +e
ln -sf libcoil.so.0.1.0 build/libcoil.so.0
export LD_LIBRARY_PATH=$PWD/build${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
out=${OUT:-/tmp}
status=0
tests=$(build/tests/coil_tests --gtest_list_tests --gtest_filter='ModelSizes/*' | awk '/^ModelSizes/{s=$1} /^  /{print s $1}')
for t in $tests; do
  unset COIL_LOGS COIL_LOG_FILE
  if [ -n "${COIL_MODEL_SIZES_LOGS:-}" ] && echo "$t" | grep -q "$COIL_MODEL_SIZES_LOGS"; then
    export COIL_LOGS=output_code COIL_LOG_FILE="$out/code_${t##*/}.txt"
  fi
  build/tests/coil_tests --gtest_filter="$t" 2>&1 | grep -E "^\[  |Failure|error|Error|rror:|Expected|which is|largest" | head -20 || true
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
done
unset COIL_LOGS COIL_LOG_FILE
for t in ${COIL_MODEL_SIZES_SANITIZE:-'ModelSizes/NanoGptBlockOnCuda.CompiledTrainingMatchesEager/4x512_f32'}; do
  echo "== memcheck $t"
  COIL_CUDA_NO_CACHE=1 compute-sanitizer --tool memcheck --error-exitcode 1 --print-limit 4 \
    build/tests/coil_tests --gtest_filter="$t" 2>&1 | grep -vE "^\[ RUN|^\[       OK" | head -60 || status=1
done
exit $status
