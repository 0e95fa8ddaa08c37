#!/usr/bin/env python3
"""Side by side: coil (eager and compiled) against PyTorch eager and torch.compile (Inductor).

Runs coil-bench for coil's numbers, then the same workloads at the same sizes with PyTorch on
the same machine, in one run, and prints the ratios. Times are medians after warm-up; the
first call of torch.compile is timed with an empty Inductor cache (a fresh
TORCHINDUCTOR_CACHE_DIR).

    python3 bench/compare_torch.py --coil-bench build/bench/coil-bench [--threads N]
        [--size cpu|gpu] [--device cpu|cuda] [--filter NAME] [--json FILE] [--mode MODE]
        [--tf32 off|defaults|on]
        [--dtype bfloat16|float16] [--amp]

With --device cuda both run on the GPU (at the GPU sizes), and every timed call waits for the
GPU's work to end (torch.cuda.synchronize), as coil-bench does.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def workloads(torch, F, gpu, device, dtype):
    """The programs of TARGETS.md, as coil-bench runs them (same sizes, same inputs' shapes), the
    inputs in `dtype`."""
    def r(*shape):
        return torch.randn(*shape, device=device).to(dtype)
    def positive(n):
        return (torch.rand(n, device=device) + 0.5).to(dtype)
    def bn_inputs(s):
        return [r(*s), r(s[1]), positive(s[1]), r(s[1]), r(s[1])]
    n, d = (8192, 1024) if gpu else (2048, 512)
    att = (8, 12, 1024, 64) if gpu else (2, 4, 256, 64)
    img = (32, 64, 56, 56) if gpu else (8, 32, 56, 56)
    mm = 2048 if gpu else 512
    conv = (32, 64, 56, 56) if gpu else (8, 64, 56, 56)
    return {
        "sincos": (lambda x: torch.sin(x) ** 2 + torch.cos(x) ** 2,
                   lambda: [r((16 if gpu else 4) << 20)]),
        "softmax": (lambda x: torch.softmax(x, -1),
                    lambda: [r(8192, 4096) if gpu else r(2048, 2048)]),
        "mm_softmax": (lambda a, b: torch.softmax(a @ b, 1), lambda: [r(mm, mm), r(mm, mm)]),
        "layernorm_gelu": (lambda x, w, b: F.gelu(F.layer_norm(x, [x.shape[1]], w, b)),
                           lambda: [r(n, d), r(d), r(d)]),
        "mlp": (lambda x, w1, b1, w2, b2: F.linear(F.gelu(F.linear(x, w1, b1)), w2, b2),
                lambda: [r(n, d), r(4 * d, d), r(4 * d), r(d, 4 * d), r(d)]),
        "attention": (lambda q, k, v: torch.softmax(q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5, -1) @ v,
                      lambda: [r(*att), r(*att), r(*att)]),
        "bn_relu": (lambda x, m, v, w, b: torch.relu(F.batch_norm(x, m, v, w, b, False)),
                    lambda: bn_inputs(img)),
        "conv_block": (lambda x, w, g, b, m, v: torch.relu(F.batch_norm(
                           F.conv2d(x, w, padding=1), m, v, g, b, False)),
                       lambda: [r(*conv), r(64, 64, 3, 3), r(64), r(64), r(64), positive(64)]),
        "long_rows_sum": (lambda x: x.sum(1), lambda: [r(8, (4 if gpu else 1) << 20)]),
        "instance_norm": (lambda x: (x - x.mean((2, 3), keepdim=True)) /
                          torch.sqrt(x.var((2, 3), keepdim=True) + 1e-5),
                          lambda: [r(*img)]),
    }


def step_begin(torch, mode, compiled):
    """With mode="reduce-overhead", each call a new step of torch's CUDA graphs (the harness keeps
    earlier outputs, which torch would otherwise refuse to let a replay overwrite; coil moves
    them away instead)."""
    if mode != "reduce-overhead":
        return compiled

    def call(*args):
        torch.compiler.cudagraph_mark_step_begin()
        return compiled(*args)
    return call


def train_mlp(torch, gpu, compiled, device, mode="default", dtype="float32"):
    """One Adam step of Linear -> GELU -> Linear -> LayerNorm, loss mean(y^2), as coil-bench's
    train_mlp: eager, or with the loss (forward + backward) and the optimizer step compiled; the
    model and input in `dtype`."""
    n, d = (4096, 1024) if gpu else (512, 256)
    dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
    torch.manual_seed(0)
    nn = torch.nn
    model = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d),
                          nn.LayerNorm(d)).to(device).to(dtype)
    opt = torch.optim.Adam(model.parameters())
    def loss_fn(x):
        y = model(x)
        return (y * y).mean()
    loss = torch.compile(loss_fn, mode=mode) if compiled else loss_fn
    opt_step = torch.compile(opt.step, mode=mode) if compiled else opt.step
    def step(x):
        l = loss(x)
        l.backward()
        opt_step()
        opt.zero_grad()
        return l
    # One CUDA-graph step per training step: the optimizer reads the backward's outputs.
    return (step_begin(torch, mode, step) if compiled else step,
            lambda: [torch.randn(n, d, device=device).to(dtype)])


def median_ms(fn, sets, sync, min_reps=5, budget_s=0.5):
    for i in range(3):
        fn(*sets[i % len(sets)])
    sync()
    times, start, i = [], time.perf_counter(), 0
    while i < min_reps or (time.perf_counter() - start < budget_s and i < 1000):
        t0 = time.perf_counter()
        fn(*sets[i % len(sets)])
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
        i += 1
    return statistics.median(times)


def device_median_ms(torch, fn, sets, min_reps=5, budget_s=0.5):
    """A call's device time on the GPU, measured as coil-bench measures it: CUDA events around
    the call, queued behind a 256 MB write that empties the L2 cache and keeps the GPU busy while
    the host queues the call (its kernels and the gaps between them, not the host's launches)."""
    for i in range(3):
        fn(*sets[i % len(sets)])
    flush = torch.empty(64 << 20, device="cuda")
    marks, start, i = [], time.perf_counter(), 0
    while i < min_reps or (time.perf_counter() - start < budget_s and i < 1000):
        flush.zero_()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn(*sets[i % len(sets)])
        b.record()
        marks.append((a, b))
        i += 1
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in marks)


def under_autocast(torch, fn, device, amp):
    """fn under torch.autocast in `amp` (None: fn itself)."""
    if amp is None:
        return fn

    def call(*args):
        with torch.autocast(device, dtype=amp):
            return fn(*args)
    return call


def run_torch(names, gpu, threads, device, mode="default", tf32="off", dtype="float32",
              amp=False):
    """`dtype` the inputs' (and train_mlp's model's); with `amp` they stay float32 and each call
    runs under autocast in it instead, as coil-bench --dtype / --amp."""
    import torch
    import torch.nn.functional as F
    autocast = getattr(torch, dtype) if amp else None
    dtype = torch.float32 if amp else getattr(torch, dtype)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    if threads:
        torch.set_num_threads(threads)
    # Both sides alike: full-precision float32 products and convolutions with --tf32 off (the
    # default here), TF32 for convolutions alone with "defaults" (PyTorch's and coil's), for both
    # with "on".
    torch.backends.cuda.matmul.allow_tf32 = tf32 == "on"
    torch.backends.cudnn.allow_tf32 = tf32 != "off"
    # PyTorch before 2.0 (Debian 12's 1.13) has no torch.compile: then eager only.
    has_compile = hasattr(torch, "compile")
    if not has_compile:
        print(f"  torch {torch.__version__} has no torch.compile: PyTorch eager only", flush=True)
    out = {}
    if "train_mlp" in names:
        eager_step, make = train_mlp(torch, gpu, False, device, dtype=dtype)
        eager_step = under_autocast(torch, eager_step, device, autocast)
        sets = [make() for _ in range(2)]
        eager = median_ms(eager_step, sets, sync)
        if not has_compile:
            out["train_mlp"] = {"torch_eager_ms": eager, "inductor_ms": None,
                                "inductor_first_ms": None}
            print(f"  torch train_mlp: eager {eager:.3f} ms", flush=True)
    if "train_mlp" in names and has_compile:
        torch._dynamo.reset()
        compiled_step, _ = train_mlp(torch, gpu, True, device, mode, dtype)
        compiled_step = under_autocast(torch, compiled_step, device, autocast)
        t0 = time.perf_counter()
        compiled_step(*sets[0])
        sync()
        first_ms = (time.perf_counter() - t0) * 1e3
        inductor = median_ms(compiled_step, sets, sync)
        out["train_mlp"] = {"torch_eager_ms": eager, "inductor_ms": inductor,
                            "inductor_first_ms": first_ms,
                            "inductor_device_ms": device_median_ms(torch, compiled_step, sets)
                            if device == "cuda" else None}
        print(f"  torch train_mlp: eager {eager:.3f} ms, inductor {inductor:.3f} ms, "
              f"first {first_ms:.0f} ms", flush=True)
    for name, (fn, make) in workloads(torch, F, gpu, device, dtype).items():
        if name not in names:
            continue
        fn = under_autocast(torch, fn, device, autocast)
        with torch.no_grad():
            first = make()
            nbytes = sum(t.numel() * t.element_size() for t in first)
            sets = [first] + [make() for _ in range(max(0, min(7, int(64e6 // max(nbytes, 1)))))]
            eager = median_ms(fn, sets, sync)
            if not has_compile:
                out[name] = {"torch_eager_ms": eager, "inductor_ms": None,
                             "inductor_first_ms": None}
                print(f"  torch {name}: eager {eager:.3f} ms", flush=True)
                continue
            torch._dynamo.reset()
            compiled = step_begin(torch, mode, torch.compile(fn, mode=mode))
            t0 = time.perf_counter()
            compiled(*first)
            sync()
            first_ms = (time.perf_counter() - t0) * 1e3
            inductor = median_ms(compiled, sets, sync)
            inductor_device = device_median_ms(torch, compiled, sets) if device == "cuda" else None
        out[name] = {"torch_eager_ms": eager, "inductor_ms": inductor, "inductor_first_ms": first_ms,
                     "inductor_device_ms": inductor_device}
        print(f"  torch {name}: eager {eager:.3f} ms, inductor {inductor:.3f} ms"
              + (f" (device {inductor_device:.3f} ms)" if inductor_device else "")
              + f", first {first_ms:.0f} ms", flush=True)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--coil-bench", required=True)
    p.add_argument("--size", default="cpu", choices=["cpu", "gpu"])
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--filter", default="")
    p.add_argument("--json", default="")
    p.add_argument("--tf32", default="off", choices=["off", "defaults", "on"],
                   help="TF32 for float32 on the GPU, both sides: off, defaults (convolutions "
                        "only, PyTorch's and coil's defaults) or on (products too)")
    p.add_argument("--mode", default="default",
                   help="the compile mode of both sides (reduce-overhead: CUDA graphs)")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"],
                   help="the inputs' dtype on both sides (coil-bench --dtype)")
    p.add_argument("--amp", action="store_true",
                   help="inputs float32, each call under autocast in --dtype, on both sides")
    a = p.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        coil_json = os.path.join(tmp, "coil.json")
        gpu_sizes = a.size == "gpu" or a.device == "cuda"
        cmd = [a.coil_bench, "--size", "gpu" if gpu_sizes else "cpu", "--device", a.device,
               "--json", coil_json]
        if a.threads:
            cmd += ["--threads", str(a.threads)]
        if a.filter:
            cmd += ["--filter", a.filter]
        if a.mode != "default":
            cmd += ["--mode", a.mode]
        cmd += ["--tf32", a.tf32]
        if a.dtype != "float32":
            cmd += ["--dtype", a.dtype]
        if a.amp:
            cmd += ["--amp"]
        print("$", " ".join(cmd), flush=True)
        rc = subprocess.call(cmd)
        coil = json.load(open(coil_json))
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(tmp, "inductor-cache")
        names = [w["name"] for w in coil["workloads"]]
        torch_results = run_torch(names, gpu_sizes, a.threads, a.device, a.mode, a.tf32, a.dtype,
                                  a.amp)

    print(f"\n{coil['cpu']}, {coil['threads']} threads, copy {coil['copy_gbps']:.1f} GB/s, "
          f"matmul {coil['blas_gflops']:.0f} GFLOP/s, TF32 {a.tf32} on both sides, "
          f"{a.dtype}{' under autocast' if a.amp else ''}")
    head = ("workload", "torch eager", "inductor", "coil", "coil/eager", "coil/ind", "roof %",
            "lib %", "ind first", "coil first", "coil warm")
    print("%-15s %11s %10s %10s %10s %9s %7s %6s %10s %10s %10s" % head)
    rows = []
    gpu_rows = []
    for w in coil["workloads"]:
        t = torch_results[w["name"]]
        if w.get("device_ms") and t.get("inductor_device_ms"):
            gpu_rows.append((w["name"], t["inductor_device_ms"], w["device_ms"],
                             t["inductor_device_ms"] / w["device_ms"],
                             100 * w["device_roofline_fraction"]))
        ind = t["inductor_ms"]
        speed = ind / w["compiled_ms"] if ind else None
        # lib %: the library's own time for the workload's products over coil's time.
        lib = w.get("library_ms")
        against = w.get("compiled_in_turns_ms") or w["compiled_ms"]  # timed in turns with lib
        lib_pct = "%5.0f%%" % (100 * lib / against) if lib else "     -"
        print("%-15s %9.3fms %10s %8.3fms %9.2fx %9s %6.0f%% %s %10s %8.0fms %8.1fms" % (
            w["name"], t["torch_eager_ms"], "%.3fms" % ind if ind else "-", w["compiled_ms"],
            t["torch_eager_ms"] / w["compiled_ms"], "%.2fx" % speed if speed else "-",
            100 * w["roofline_fraction"], lib_pct,
            "%.0fms" % t["inductor_first_ms"] if ind else "-",
            w["first_call_cold_ms"], w["first_call_warm_new_process_ms"]))
        rows.append({**w, **t, "speedup_vs_inductor": speed})
    if gpu_rows:
        print("\ndevice time (CUDA events, per call)")
        print("%-15s %12s %10s %9s %7s" % ("workload", "inductor", "coil", "coil/ind", "roof %"))
        for name, ind, coil_dev, speed, roof in gpu_rows:
            print("%-15s %10.3fms %8.3fms %8.2fx %6.0f%%" % (name, ind, coil_dev, speed, roof))
    if a.json:
        json.dump({"machine": {k: coil[k] for k in ("cpu", "threads", "copy_gbps", "blas_gflops")},
                   "tf32": a.tf32, "dtype": a.dtype, "amp": a.amp, "workloads": rows},
                  open(a.json, "w"), indent=2)
    return rc


if __name__ == "__main__":
    sys.exit(main())
