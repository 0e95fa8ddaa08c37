#!/usr/bin/env bash
# On the device machine, with prebuilt binaries (bench/device_prebuilt.sh's carry): the host's
# 16 cores in bfloat16: which 16-bit instructions the CPU has, coil-bench's workloads side by
# side with PyTorch (bench/compare_torch.py --device cpu --dtype bfloat16), and which oneDNN
# kernel takes a bfloat16 product (its verbose line). Results under $OUT.
cd "$(dirname "$0")/.."
grep -o -w 'avx512_bf16\|avx512_fp16\|amx_bf16\|amx_tile\|f16c' /proc/cpuinfo | sort | uniq -c
bash bench/device_prebuilt.sh \
  "python3 bench/compare_torch.py --coil-bench build/bench/coil-bench --threads 16 \
--dtype bfloat16 --json '$OUT/compare_cpu_bf16.json' 2>&1 | tee '$OUT/compare_cpu_bf16.txt' | tail -16" \
  "printf 'def forward(self, a: \"bf16[4096, 768][768, 1]cpu\", b: \"bf16[768, 3072][3072, 1]cpu\"):\n    c = coil.mm(a, b)\n    return (c,)\n' > /tmp/mm_bf16.graph && \
ONEDNN_VERBOSE=1 OMP_NUM_THREADS=16 build/tools/coil run /tmp/mm_bf16.graph 2>&1 | grep -E 'exec,cpu,matmul|time per' | tail -2"
