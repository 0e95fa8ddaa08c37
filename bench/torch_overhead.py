"""PyTorch's host cost per eager GPU op for the calls bench/overhead.cpp times in coil (64x64
matmul, x + 1 and x.mul_(1.0) on 1024 floats), so both are measured on the same machine."""
import time

import torch


def per_call_us(f, calls=20000):
    for _ in range(1000):
        f()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        f()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls * 1e6


a = torch.randn(64, 64, device="cuda")
x = torch.randn(1024, device="cuda")
for name, f in [("matmul 64x64", lambda: a @ a), ("x + 1", lambda: x + 1),
                ("x.mul_(1.0)", lambda: x.mul_(1.0))]:
    print(f"torch eager {name}: {per_call_us(f):.2f} us per call")
