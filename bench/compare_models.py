#!/usr/bin/env python3
"""ResNet-50 and GPT-2 small side by side: coil (coil-bench-models) against PyTorch eager and
torch.compile (Inductor), the same models, sizes and protocol, on the same machine in one run.

    python3 bench/compare_models.py --coil-bench-models build/bench/coil-bench-models
        [--device cpu|cuda] [--model resnet50|gpt2] [--threads N] [--quick] [--json FILE]
        [--channels-last] [--amp bf16|fp16]

The PyTorch models are scripts/make_model_checkpoints.py's (torchvision's ResNet and Hugging
Face's GPT-2 architecture, written with torch.nn), at full size with random weights. Times are
medians after warm-up (one call, two for training steps), as coil-bench-models does; the first
call is torch.compile's, with an empty Inductor cache. TF32 is off on both sides. --amp runs
each forward and loss under autocast on both sides (torch.autocast, coil::autocast), the fp16
training steps with a GradScaler; --channels-last converts ResNet-50 and its images on both.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))


def timer(torch, device):
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    def median_ms(fn, reps, warmups=1):
        """The median of `reps` calls after `warmups` (the first call's time returned too). A
        training step warms up twice: the optimizer step's second call compiles again once
        its momentum buffers exist."""
        def once():
            sync()
            t0 = time.perf_counter()
            fn()
            sync()
            return (time.perf_counter() - t0) * 1e3
        first = once()
        for _ in range(warmups - 1):
            once()
        return statistics.median(once() for _ in range(reps)), first
    return median_ms


def gpt2_with_cache(torch, F, model, ids, pos, past):
    """A forward over a KV cache with the model's own weights: (ids, positions, past or None) ->
    (the next ids, past grown by the new positions). Without a past, causal over the ids."""
    x = model.wte(ids) + model.wpe(pos)
    out = []
    for i, block in enumerate(model.h):
        a = block.attn
        B, T, C = x.shape
        q, k, v = a.c_attn(block.ln_1(x)).split(C, dim=2)
        heads = lambda t: t.view(B, T, a.n_head, C // a.n_head).transpose(1, 2)
        q, k, v = heads(q), heads(k), heads(v)
        if past is not None:
            k = torch.cat([past[2 * i], k], 2)
            v = torch.cat([past[2 * i + 1], v], 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=past is None)
        x = x + a.c_proj(y.transpose(1, 2).reshape(B, T, C))
        x = x + block.mlp(block.ln_2(x))
        out += [k, v]
    logits = model.ln_f(x) @ model.wte.weight.t()
    return logits[:, -1].argmax(-1, keepdim=True), out


def training_step(torch, opt, loss, args, compiled, amp):
    """zero_grad, the loss (under autocast where `amp` names a dtype), backward, the optimizer's
    step (through a GradScaler for float16); the loss and the step compiled or not."""
    loss = torch.compile(loss) if compiled else loss
    step = torch.compile(opt.step) if compiled else opt.step
    scaler = torch.amp.GradScaler(enabled=amp == torch.float16)

    def call():
        opt.zero_grad()
        with torch.autocast(args[0].device.type, dtype=amp or torch.float32, enabled=amp is not None):
            value = loss(*args)
        scaler.scale(value).backward()
        if scaler.is_enabled():
            scaler.step(opt)  # (the compiled step is the scaler's to call: eager here)
            scaler.update()
        else:
            step()
    return call


def run_torch(device, which, quick, amp=None, channels_last=False):
    import torch
    import torch.nn.functional as F
    import make_model_checkpoints as m
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    median_ms = timer(torch, device)
    reps = 2 if quick else 3
    gpu = device == "cuda"
    rows = {}

    def memory(fn):
        """The GPU memory held before one more (warm) call and the most the call added on top,
        in MiB, as coil-bench-models's."""
        if not gpu:
            return 0, 0
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        held = torch.cuda.memory_allocated()
        fn()
        torch.cuda.synchronize()
        return held / 2**20, (torch.cuda.max_memory_allocated() - held) / 2**20

    def both(name, items, make_eager, make_compiled, warmups=1, reps=reps):
        eager, _ = median_ms(make_eager(), reps, warmups)
        fn = make_compiled()
        compiled, first = median_ms(fn, reps, warmups)
        held, above = memory(fn)
        rows[name] = {"items_per_call": items, "torch_eager_ms": eager, "inductor_ms": compiled,
                      "inductor_first_ms": first, "inductor_held_mib": held,
                      "inductor_peak_above_held_mib": above}
        print(f"  torch {name}: eager {eager:.2f} ms, inductor {compiled:.2f} ms, "
              f"first {first:.0f} ms", flush=True)

    def no_grad(fn, *args):
        def call():
            with torch.no_grad(), torch.autocast(device, dtype=amp or torch.float32,
                                                 enabled=amp is not None):
                fn(*args)
        return call

    if which in ("", "resnet50"):
        torch.manual_seed(0)
        model = m.ResNet(m.Bottleneck, [3, 4, 6, 3], 64, 1000).to(device).eval()
        batch, train_batch = (64, 32) if gpu else (16, 8)
        x = torch.randn(batch, 3, 224, 224, device=device)
        if channels_last:
            model = model.to(memory_format=torch.channels_last)
            x = x.contiguous(memory_format=torch.channels_last)
        both("resnet50 inference", batch, lambda: no_grad(model, x),
             lambda: no_grad(torch.compile(model), x))
        model.train()
        xt = torch.randn(train_batch, 3, 224, 224, device=device)
        if channels_last:
            xt = xt.contiguous(memory_format=torch.channels_last)
        yt = torch.randint(0, 1000, (train_batch,), device=device)

        def train(compiled):
            opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
            return training_step(torch, opt, lambda a, b: F.cross_entropy(model(a), b), (xt, yt),
                                 compiled, amp)
        both("resnet50 train step", train_batch, lambda: train(False), lambda: train(True), 2)

    if which in ("", "gpt2"):
        torch.manual_seed(0)
        cfg = dict(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12,
                   layer_norm_epsilon=1e-5)
        model = m.GPT2Model(cfg).to(device).eval()
        ids = torch.randint(0, 50257, (8, 512), device=device)
        both("gpt2 forward 8x512", 8 * 512, lambda: no_grad(model, ids),
             lambda: no_grad(torch.compile(model), ids))
        model.train()
        labels = torch.randint(0, 50257, (8, 512), device=device)

        def lm_loss(a, b):
            logits = model(a)
            return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), b.reshape(-1))

        def train(compiled):
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
            return training_step(torch, opt, lm_loss, (ids, labels), compiled, amp)
        both("gpt2 train step 8x512", 8 * 512, lambda: train(False), lambda: train(True), 2)
        model.eval()
        prompt = torch.randint(0, 50257, (1, 16), device=device)
        new_tokens = 64

        def generate(compiled):
            def step(nxt, pos, past):
                return gpt2_with_cache(torch, F, model, nxt, pos, past)
            step = torch.compile(step) if compiled else step

            @torch.no_grad()
            def call():  # float32 under --amp too, as coil-bench-models generates
                positions = torch.arange(prompt.shape[1], device=device).unsqueeze(0)
                nxt, past = gpt2_with_cache(torch, F, model, prompt, positions, None)
                for t in range(new_tokens - 1):
                    pos = torch.full((1, 1), past[0].shape[2], device=device)
                    nxt, past = step(nxt, pos, past)
            return call
        both("gpt2 generate b1", new_tokens, lambda: generate(False), lambda: generate(True), reps=1)
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--coil-bench-models", default="")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--model", default="", choices=["", "resnet50", "gpt2"])
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", default="")
    p.add_argument("--amp", default="", choices=["", "bf16", "fp16"])
    p.add_argument("--channels-last", action="store_true")
    p.add_argument("--coil-json", default="",
                   help="coil's side from an earlier coil-bench-models --json instead of a run")
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        coil_json = os.path.join(tmp, "coil.json")
        cmd = [a.coil_bench_models, "--device", a.device, "--json", coil_json]
        if a.model:
            cmd += ["--model", a.model]
        if a.quick:
            cmd += ["--quick"]
        if a.amp:
            cmd += ["--amp", a.amp]
        if a.channels_last:
            cmd += ["--channels-last"]
        env = dict(os.environ, **({"OMP_NUM_THREADS": str(a.threads)} if a.threads else {}))
        rc = 0
        if a.coil_json:
            coil_json = a.coil_json
        else:
            print("$", " ".join(cmd), flush=True)
            rc = subprocess.call(cmd, env=env)
        coil = json.load(open(coil_json))
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(tmp, "inductor-cache")
        import torch
        if a.threads:
            torch.set_num_threads(a.threads)
        amp = {"": None, "bf16": torch.bfloat16, "fp16": torch.float16}[a.amp]
        t = run_torch(a.device, a.model, a.quick, amp, a.channels_last)
    head = ("model", "torch eager", "inductor", "coil eager", "coil", "coil/ind", "ind first",
            "coil first")
    print("\n%-22s %12s %12s %12s %12s %9s %10s %10s" % head)
    rows = []
    for r in coil["rows"]:
        tr = t.get(r["name"])
        if tr is None:  # a model PyTorch's side did not run (--model)
            continue
        per_s = lambda ms: r["items_per_call"] / ms * 1e3
        print("%-22s %10.0f/s %10.0f/s %10.0f/s %10.0f/s %8.2fx %8.0fms %8.0fms" % (
            r["name"], per_s(tr["torch_eager_ms"]), per_s(tr["inductor_ms"]),
            per_s(r["eager_ms"]), per_s(r["compiled_ms"]), tr["inductor_ms"] / r["compiled_ms"],
            tr["inductor_first_ms"], r["first_ms"]))
        if tr["inductor_held_mib"] and r.get("held_mib"):
            print("%-22s memory held + the call's peak above it: inductor %.0f + %.0f MiB, "
                  "coil %.0f + %.0f MiB" % ("", tr["inductor_held_mib"],
                                            tr["inductor_peak_above_held_mib"], r["held_mib"],
                                            r["peak_above_held_mib"]))
        rows.append({**r, **tr, "speedup_vs_inductor": tr["inductor_ms"] / r["compiled_ms"]})
    if a.json:
        json.dump({"device": a.device, "tf32": False, "amp": a.amp or "off",
                   "channels_last": a.channels_last, "rows": rows}, open(a.json, "w"), indent=2)
    return rc


if __name__ == "__main__":
    sys.exit(main())
