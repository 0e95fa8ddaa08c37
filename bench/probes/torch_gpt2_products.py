"""PyTorch's own time for the matrix products of one GPT-2 small training step (8 x 512 tokens
unless B and T say otherwise) on the CPU, each linear layer's forward product and its two
gradient products, at the thread count torch is given (OMP_NUM_THREADS): what coil's products
(its profiler's mm and addmm rows of the same step) are measured against."""
import os
import time

import torch

tokens = int(os.environ.get("B", 8)) * int(os.environ.get("T", 512))
layers, d, vocab = 12, 768, 50257
# (rows, inner, cols) of the forward product of each linear layer, and how many of it a step has.
linears = [((tokens, d, 3 * d), layers), ((tokens, d, d), layers), ((tokens, d, 4 * d), layers),
           ((tokens, 4 * d, d), layers), ((tokens, d, vocab), 1)]


def timed(f, reps=3):
    f()
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t)
    return best


total = 0.0
print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {tokens} tokens")
# The layouts of nn.Linear (a weight of out x in features) and of its two gradients, as the
# compiled step calls them (bench/probes/gpt2_products.cpp times coil's the same way).
for (m, k, n), count in linears:
    x, w, b, dy = torch.randn(m, k), torch.randn(n, k), torch.randn(n), torch.randn(m, n)
    forward = (lambda: torch.addmm(b, x, w.t())) if n != vocab else (lambda: x @ w.t())
    for name, f in [("forward  x W^T", forward), ("grad x   dy W", lambda: dy @ w),
                    ("grad W   dy^T x", lambda: dy.t() @ x)]:
        s = timed(f)
        total += s * count
        print(f"{m:6d} x {k:5d} x {n:6d} {name:16s} {s * 1e3:8.2f} ms  "
              f"{2 * m * k * n / s / 1e9:7.1f} GFLOP/s  x{count}")
print(f"the step's linear-layer products: {total * 1e3:.1f} ms")
