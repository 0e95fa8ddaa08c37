"""PyTorch's side of bench/probes/library_load.cpp: in a new process, after the CUDA context,
the time of the first and second float32 product at mm_softmax's size (2048³; cuBLAS loads on
the first) and of the first and second convolution at conv_block's (32 x 64 x 56², 64 filters
of 3², padding 1; cuDNN loads on the first). TF32 off, as the benchmarks run."""
import time

import torch

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


def timed(label, f):
    t = time.perf_counter()
    f()
    torch.cuda.synchronize()
    print(f"{label:34s}{(time.perf_counter() - t) * 1e3:9.1f} ms")


timed("CUDA context", lambda: torch.cuda.init() or torch.zeros(1, device="cuda"))
a = torch.zeros(2048, 2048, device="cuda")
x, w = torch.zeros(32, 64, 56, 56, device="cuda"), torch.zeros(64, 64, 3, 3, device="cuda")
torch.cuda.synchronize()
timed("torch: first 2048^3 product", lambda: a @ a)
timed("torch: second", lambda: a @ a)
timed("torch: first convolution", lambda: torch.nn.functional.conv2d(x, w, padding=1))
timed("torch: second", lambda: torch.nn.functional.conv2d(x, w, padding=1))
