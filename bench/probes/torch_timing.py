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


def print_kernels(fn, title, rows=25):
    """One call of `fn` after 3 to warm up, under torch.profiler: its CUDA kernels summed by
    name, largest first, after a line with `title`, their count and the GPU time."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    per, count = {}, {}
    for e in events:
        per[e.name[:90]] = per.get(e.name[:90], 0) + e.device_time
        count[e.name[:90]] = count.get(e.name[:90], 0) + 1
    total = sum(e.device_time for e in events)
    print(f"{title}: {len(events)} kernels, {total / 1e3:.2f} ms of GPU time")
    for name, us in sorted(per.items(), key=lambda kv: -kv[1])[:rows]:
        print(f"{us / 1e3:9.3f} ms {count[name]:5d}x  {name}")
