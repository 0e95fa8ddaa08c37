"""PyTorch's scaled_dot_product_attention in bfloat16 at the shapes of
bench/probes/attention_16bit.cpp, under each of its backends (flash, cuDNN, memory-efficient,
chosen with torch.nn.attention.sdpa_kernel) and with none forced: the forward alone, then
forward + backward; device time by CUDA events (the median of 10 calls after 3)."""
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from torch_timing import median_ms

BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
            "efficient": SDPBackend.EFFICIENT_ATTENTION}


def run(b, h, s, d, causal, strided):
    if strided:
        qkv = torch.randn(b, s, 3 * h * d, device="cuda", dtype=torch.bfloat16)
        q, k, v = (t.view(b, s, h, d).transpose(1, 2) for t in qkv.split(h * d, 2))
    else:
        q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    g = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16)
    flops = 4.0 * b * h * s * s * d * (0.5 if causal else 1.0)
    label = f"{b}x{h}x{s}x{d}{' causal' if causal else ''}{' strided' if strided else ''}"
    for name, backend in list(BACKENDS.items()) + [("default", None)]:
        try:
            ctx = sdpa_kernel([backend]) if backend is not None else sdpa_kernel(list(BACKENDS.values()))
            with ctx:
                fwd = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
                qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))

                def step():
                    qg.grad = kg.grad = vg.grad = None
                    F.scaled_dot_product_attention(qg, kg, vg, is_causal=causal).backward(g)

                both = median_ms(step)
            print(f"torch {name:9s} {label}: forward {fwd:.3f} ms ({flops / fwd / 1e9:.0f} TFLOP/s), "
                  f"backward {both - fwd:.3f} ms ({2.5 * flops / (both - fwd) / 1e9:.0f} TFLOP/s)")
        except RuntimeError as e:
            print(f"torch {name:9s} {label}: not available ({str(e).splitlines()[0][:80]})")


torch.backends.cuda.matmul.allow_tf32 = False
for causal in (False, True):
    run(8, 12, 1024, 64, causal, False)
    run(4, 32, 4096, 128, causal, False)
run(8, 12, 1024, 64, True, True)
