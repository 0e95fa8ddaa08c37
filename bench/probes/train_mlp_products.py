"""PyTorch's side of bench/probes/train_mlp_products.cpp: train_mlp's five products (TF32 off),
each alone, CUDA events, the median of 10 after 3."""
import torch

from torch_timing import median_ms

torch.backends.cuda.matmul.allow_tf32 = False
r = lambda *s: torch.randn(*s, device="cuda")
x, w1, w2, h, g, gh = r(4096, 1024), r(4096, 1024), r(1024, 4096), r(4096, 4096), r(4096, 1024), r(4096, 4096)
for name, f in [("x w1^T   (forward 1)", lambda: x @ w1.t()), ("h w2^T   (forward 2)", lambda: h @ w2.t()),
                ("g^T h    (w2's grad)", lambda: g.t() @ h), ("g w2     (h's grad)", lambda: g @ w2),
                ("gh^T x   (w1's grad)", lambda: gh.t() @ x)]:
    print(f"torch {name:22s} {median_ms(f):.3f} ms")
