"""The Python probes' device time of a piece of GPU work: CUDA events around each call, the
median of 10 calls after 3 (bench/probes/device_timing.h's, for PyTorch)."""
import torch


def median_ms(fn):
    for _ in range(3):
        fn()
    times = []
    for _ in range(10):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return sorted(times)[len(times) // 2]
