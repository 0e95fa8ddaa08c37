"""PyTorch's side of bench/probes/train_step.cpp: one training step (GPT-2 small at 8 x 512 with
AdamW, ResNet-50 at 32 x 224² with SGD and momentum, or coil-bench's train_mlp with Adam; TF32
off), eager or Inductor, after warm-up; its CUDA kernels from torch.profiler, summed by name.
Usage: torch_train_kernels.py gpt2|resnet50|mlp eager|inductor [bf16|fp16 [channels-last]]: a dtype
runs the loss under autocast in it, channels-last ResNet-50 in that layout (train_step.cpp's
arguments)."""
import os, sys
import torch
import torch.nn.functional as F
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import make_model_checkpoints as m
from torch_timing import print_kernels

which = sys.argv[1] if len(sys.argv) > 1 else "gpt2"
compiled = len(sys.argv) > 2 and sys.argv[2] == "inductor"
amp = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(sys.argv[3]) if len(sys.argv) > 3 else None
channels_last = len(sys.argv) > 4 and sys.argv[4] == "channels-last"
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.manual_seed(0)
if which == "mlp":
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(),
                                torch.nn.Linear(4096, 1024), torch.nn.LayerNorm(1024)).cuda()
    ids = torch.randn(4096, 1024, device="cuda")
    labels = ids
    opt = torch.optim.Adam(model.parameters())
elif which == "resnet50":
    model = m.ResNet(m.Bottleneck, [3, 4, 6, 3], 64, 1000).cuda().train()
    ids = torch.randn(32, 3, 224, 224, device="cuda")
    labels = torch.randint(0, 1000, (32,), device="cuda")
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
        ids = ids.contiguous(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
else:
    cfg = dict(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12,
               layer_norm_epsilon=1e-5)
    model = m.GPT2Model(cfg).cuda().train()
    ids = torch.randint(0, 50257, (8, 512), device="cuda")
    labels = torch.randint(0, 50257, (8, 512), device="cuda")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)


def lm_loss(a, b):
    if amp is not None:
        with torch.autocast("cuda", dtype=amp):
            return model_loss(a, b)
    return model_loss(a, b)


def model_loss(a, b):
    if which == "mlp":
        y = model(a)
        return (y * y).mean()
    logits = model(a)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), b.reshape(-1))


loss = torch.compile(lm_loss) if compiled else lm_loss
step = torch.compile(opt.step) if compiled else opt.step


def train():
    opt.zero_grad()
    loss(ids, labels).backward()
    step()


print_kernels(train, f"torch {which} {'inductor' if compiled else 'eager'}", 25)
