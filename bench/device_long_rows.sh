#!/usr/bin/env bash
# On the device machine: what long_rows_sum (sum(x, dim=1) over 8 rows of 4M floats) needs to
# come near Inductor's kernel: bench/probes/long_rows.cu (coil's split, other splits, cache hints
# on the loads) and the Triton kernels Inductor generates for it (TORCH_LOGS=output_code), with
# their launch configurations.
set -uo pipefail
cd "$(dirname "$0")/.."
/usr/local/cuda/bin/nvcc -O3 -arch=sm_90 bench/probes/long_rows.cu -o /tmp/long_rows &&
  timeout 90 /tmp/long_rows
/usr/local/cuda/bin/cuobjdump -sass /tmp/long_rows | grep -oE "LDG[A-Z0-9._]*" | sort | uniq -c
TORCH_LOGS=output_code timeout 120 python3 - <<'PY' 2>&1 | grep -vE "Warning|warn" | sed -n "/@triton/,/^def call/p" | grep -vE "^\s*$" | head -120
import torch
x = torch.randn(8, 4 << 20, device="cuda")
f = torch.compile(lambda x: x.sum(1))
f(x)
torch.cuda.synchronize()
PY
