"""PyTorch's scaled_dot_product_attention at the shapes of bench/probes/attention_gpu.cpp
(float32, TF32 off): the forward alone and forward + backward, device time by CUDA events (the
median of 10 calls after 3), and which kernels ran (torch.profiler)."""
import torch
import torch.nn.functional as F

from torch_timing import median_ms

torch.backends.cuda.matmul.allow_tf32 = False


def run(label, b, h, s, d, causal, strided):
    if strided:
        qkv = torch.randn(b, s, 3 * h * d, device="cuda")
        q, k, v = (t.view(b, s, h, d).transpose(1, 2) for t in qkv.split(h * d, 2))
    else:
        q, k, v = (torch.randn(b, h, s, d, device="cuda") for _ in range(3))
    fwd = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
    qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))
    g = torch.randn(b, h, s, d, device="cuda")

    def step():
        qg.grad = kg.grad = vg.grad = None
        F.scaled_dot_product_attention(qg, kg, vg, is_causal=causal).backward(g)

    both = median_ms(step)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    names = sorted({e.name[:60] for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA})
    flops = 4.0 * b * h * s * s * d * (0.5 if causal else 1.0)
    print(f"torch {label:34s} forward {fwd:.3f} ms ({flops / fwd / 1e9:.1f} TFLOP/s), "
          f"forward+backward {both:.3f} ms (backward {both - fwd:.3f} ms); kernels {names}")


run("gpt2 8x12x512x64 causal", 8, 12, 512, 64, True, False)
run("gpt2 8x12x512x64 causal, strided", 8, 12, 512, 64, True, True)
run("8x12x512x64 no mask", 8, 12, 512, 64, False, False)
run("8x12x1024x64 no mask (workload)", 8, 12, 1024, 64, False, False)
