#!/usr/bin/env bash
# On the device machine, with prebuilt binaries (bench/device_prebuilt.sh's carry): coil-bench's
# workloads side by side with PyTorch in bfloat16 (bench/compare_torch.py --dtype bfloat16),
# conv_block in float32 with both sides' TF32 defaults (convolutions allowed TF32), and the
# hand-written copy kernels at the bf16 workloads' byte counts (bench/probes/pointwise_roofline.cu,
# what a memory-bound kernel of that size can reach). Results under $OUT.
cd "$(dirname "$0")/.."
nvcc -O3 -arch=sm_90 bench/probes/pointwise_roofline.cu -o /tmp/pointwise_roofline
bash bench/device_prebuilt.sh \
  "python3 bench/compare_torch.py --coil-bench build/bench/coil-bench --device cuda \
--dtype bfloat16 --json '$OUT/compare_bf16.json' 2>&1 | tail -30" \
  "python3 bench/compare_torch.py --coil-bench build/bench/coil-bench --device cuda \
--filter conv_block --tf32 defaults --json '$OUT/compare_conv_tf32.json' 2>&1 | tail -6" \
  "/tmp/pointwise_roofline | grep -E '^==|U=1 block=256 stream=false|grid-stride 4' | tee '$OUT/pointwise_roofline.txt'"
