"""PyTorch's side of bench/probes/workload_kernels.cpp: one coil-bench workload (compare_torch.py's
definitions, GPU sizes, TF32 off), eager or Inductor, after warm-up; the CUDA kernels of one
call behind an L2-emptying write, from torch.profiler, each with its device time.
Usage: torch_workload_kernels.py WORKLOAD eager|inductor [MODE]"""
import os, sys
import torch
import torch.nn.functional as F
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from compare_torch import workloads

name, side = sys.argv[1], sys.argv[2]
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
fn, make = workloads(torch, F, True, "cuda")[name]
if side == "inductor":
    fn = torch.compile(fn, mode=sys.argv[3] if len(sys.argv) > 3 else "default")
args = make()
flush = torch.empty(64 << 20, device="cuda")
with torch.no_grad():
    for _ in range(3):
        fn(*args)
    flush.zero_()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn(*args)
        torch.cuda.synchronize()
total = 0.0
for e in prof.events():
    if e.device_type == torch.autograd.DeviceType.CUDA:
        total += e.device_time
        print(f"{e.device_time:9.1f} us  {e.name[:110]}")
print(f"torch {name} {side}: {total:.1f} us of kernels in one call")
