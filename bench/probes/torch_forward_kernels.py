"""PyTorch's side of bench/probes/forward_gaps.cpp: one inference forward (GPT-2 small at 8 x 512,
ResNet-50 at 64 channels-last images of 224²; eval, no_grad, TF32 off), eager or Inductor, under
autocast where a dtype is given, after warm-up; its CUDA kernels from torch.profiler, summed by
name. Usage: torch_forward_kernels.py gpt2|resnet50 eager|inductor [bf16|fp16]"""
import os, sys
import torch
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import make_model_checkpoints as m
from torch_timing import print_kernels

which = sys.argv[1] if len(sys.argv) > 1 else "gpt2"
compiled = len(sys.argv) > 2 and sys.argv[2] == "inductor"
amp = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(sys.argv[3] if len(sys.argv) > 3 else "")
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.manual_seed(0)
if which == "resnet50":
    model = m.ResNet(m.Bottleneck, [3, 4, 6, 3], 64, 1000).cuda().eval()
    model = model.to(memory_format=torch.channels_last)
    x = torch.randn(64, 3, 224, 224, device="cuda").contiguous(memory_format=torch.channels_last)
else:
    cfg = dict(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12,
               layer_norm_epsilon=1e-5)
    model = m.GPT2Model(cfg).cuda().eval()
    x = torch.randint(0, 50257, (8, 512), device="cuda")
forward = torch.compile(model) if compiled else model


def call():
    with torch.no_grad(), torch.autocast("cuda", dtype=amp or torch.float32, enabled=amp is not None):
        forward(x)


print_kernels(call, f"torch {which} forward {'inductor' if compiled else 'eager'}", 40)
