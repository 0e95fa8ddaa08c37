#!/usr/bin/env bash
# On the device machine, with prebuilt binaries (bench/device_prebuilt.sh's carry plus
# build/attention_16bit, built as bench/probes/attention_16bit.cpp says): the 16-bit attention
# tests, then coil's and PyTorch's attention in bfloat16 side by side, logs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
COIL_DEPS=${COIL_DEPS:-.deps-run} COIL_SKIP_BUILD=1 source bench/device_setup.sh
set +e
ln -sf libcoil.so.0.1.0 build/libcoil.so.0
export LD_LIBRARY_PATH=$PWD/build${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
CUDNN_LOGLEVEL_DBG=2 CUDNN_LOGDEST_DBG="$OUT/cudnn_log.txt" build/tests/coil_tests \
  --gtest_filter="${COIL_TESTS:-*Attention16OnCuda*:*AttentionOnCuda*:CudaAttentionBackward*:*NanoGptBlockOnCuda*:ModelSizesOnCuda.Gpt2*}" \
  > "$OUT/tests.txt" 2>&1
echo "tests: rc $?"; grep -E "^\[  (FAILED|PASSED) |Failure|declined" "$OUT/tests.txt" | head -40
build/attention_16bit 2>&1 | tee "$OUT/coil.txt"
(cd bench/probes && python3 torch_attention_16bit.py) 2>&1 | tee "$OUT/torch.txt"
