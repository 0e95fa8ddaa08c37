#!/usr/bin/env bash
# On the device machine, with prebuilt binaries (bench/device_prebuilt.sh's carry plus
# build/probes/attention_16bit, from `ninja probes` with -DCOIL_BUILD_PROBES=ON): the 16-bit
# attention tests (or those $COIL_TESTS names), then coil's and PyTorch's attention in bfloat16
# side by side; the logs under $OUT.
cd "$(dirname "$0")/.."
tests=${COIL_TESTS:-*Attention16OnCuda*:*AttentionOnCuda*:CudaAttentionBackward*:*NanoGptBlockOnCuda*:ModelSizesOnCuda.Gpt2*}
bash bench/device_prebuilt.sh \
  "CUDNN_LOGLEVEL_DBG=2 CUDNN_LOGDEST_DBG='$OUT/cudnn_log.txt' build/tests/coil_tests --gtest_filter='$tests' > '$OUT/tests.txt' 2>&1; rc=\$?; grep -E '^\[  (FAILED|PASSED) |Failure|declined' '$OUT/tests.txt' | head -40; exit \$rc" \
  "build/probes/attention_16bit | tee '$OUT/coil.txt'" \
  "cd bench/probes && python3 torch_attention_16bit.py | tee '$OUT/torch.txt'"
