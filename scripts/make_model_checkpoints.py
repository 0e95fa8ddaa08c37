#!/usr/bin/env python3
"""Model checkpoints and reference outputs for coil's model tests (tests/data/models/).

Builds three small models with PyTorch's own nn modules and fixed seeds:
  gpt2_tiny      Hugging Face GPT2Model architecture and parameter names (no "transformer."
                 prefix), vocab 96, 32 positions, 64 wide, 2 layers, 4 heads; LM head tied to wte.
  resnet18_tiny  torchvision ResNet-18 (BasicBlock, [2,2,2,2]) with base width 8, 10 classes.
  resnet50_tiny  torchvision ResNet-50 (Bottleneck v1.5, [3,4,6,3]) with base width 4, 10 classes.
For each model it writes <name>.safetensors (float32 weights and buffers) and
<name>_expected.safetensors (inputs as given, references in float64: the float32 weights are
converted to float64 and the forward/backward/optimizer steps are run on that copy). What each
key means is written in the files' __metadata__ and in tests/data/models/README.md.

The safetensors files are written by hand (no safetensors package): 8-byte little-endian
header length N, N bytes of JSON (padded with spaces to a multiple of 8), then the raw
little-endian row-major tensor bytes, contiguous. The header lists the tensors in state_dict
order; the data holds the 8-byte dtypes first so that every tensor is aligned.

Needs only Debian's python3-torch (PyTorch 1.13; numpy comes with it).
    python3 scripts/make_model_checkpoints.py           # writes tests/data/models/
    python3 scripts/make_model_checkpoints.py --check   # reads the files back and re-verifies
"""
import copy, json, math, os, struct, sys
import torch
import torch.nn as nn
import torch.nn.functional as F

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "models")
DTYPES = {torch.float32: ("F32", "<f4"), torch.float64: ("F64", "<f8"), torch.int64: ("I64", "<i8")}


def write_safetensors(path, tensors, metadata):
    """tensors: dict name -> tensor (F32/F64/I64); metadata: dict str -> str."""
    header = {"__metadata__": dict(metadata)}
    header.update((name, None) for name in tensors)  # the header lists tensors in given order
    # the data holds 8-byte dtypes first, then F32 (a stable sort), so every tensor is aligned
    blobs, offset = [], 0
    for name in sorted(tensors, key=lambda k: -tensors[k].element_size()):
        t = tensors[name].detach().cpu().contiguous()
        code, np_dtype = DTYPES[t.dtype]
        data = t.numpy().astype(np_dtype).tobytes()
        header[name] = {"dtype": code, "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    js = json.dumps(header, separators=(",", ":")).encode()
    js += b" " * (-len(js) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(js)) + js + b"".join(blobs))


# ---------------------------------------------------------------------------------------------
# GPT-2 (Hugging Face GPT2Model layout; Conv1D weights are [in, out], y = x @ W + b)

class Conv1D(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_in, n_out))
        self.bias = nn.Parameter(torch.zeros(n_out))

    def forward(self, x):
        return x @ self.weight + self.bias


def gelu_tanh(x):  # Hugging Face "gelu_new"
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


class GPT2Attention(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.n_head = n_head
        self.c_attn = Conv1D(n_embd, 3 * n_embd)
        self.c_proj = Conv1D(n_embd, n_embd)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        heads = lambda t: t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q, k, v = heads(q), heads(k), heads(v)                     # [B, H, T, D]
        if hasattr(F, "scaled_dot_product_attention"):  # PyTorch 2 (bench/compare_models.py)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            scores = q @ k.transpose(-1, -2) / math.sqrt(C // self.n_head)
            causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
            scores = scores.masked_fill(~causal, float("-inf"))
            y = scores.softmax(dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).reshape(B, T, C))


class GPT2MLP(nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        self.c_fc = Conv1D(n_embd, 4 * n_embd)
        self.c_proj = Conv1D(4 * n_embd, n_embd)

    def forward(self, x):
        return self.c_proj(gelu_tanh(self.c_fc(x)))


class GPT2Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg["n_embd"], eps=cfg["layer_norm_epsilon"])
        self.attn = GPT2Attention(cfg["n_embd"], cfg["n_head"])
        self.ln_2 = nn.LayerNorm(cfg["n_embd"], eps=cfg["layer_norm_epsilon"])
        self.mlp = GPT2MLP(cfg["n_embd"])

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2Model(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.wte = nn.Embedding(cfg["vocab_size"], cfg["n_embd"])
        self.wpe = nn.Embedding(cfg["n_positions"], cfg["n_embd"])
        self.h = nn.ModuleList(GPT2Block(cfg) for _ in range(cfg["n_layer"]))
        self.ln_f = nn.LayerNorm(cfg["n_embd"], eps=cfg["layer_norm_epsilon"])

    def forward(self, input_ids):  # returns logits (LM head tied to wte)
        pos = torch.arange(input_ids.shape[1], device=input_ids.device)
        x = self.wte(input_ids) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.ln_f(x) @ self.wte.weight.t()


GPT2_CONFIG = dict(vocab_size=96, n_positions=32, n_embd=64, n_layer=2, n_head=4,
                   layer_norm_epsilon=1e-5)


def make_gpt2():
    cfg = GPT2_CONFIG
    # Hugging Face's init scheme (normal weights, c_proj scaled by 1/sqrt(2 * n_layer), zero
    # biases, LayerNorm 1/0) with larger standard deviations than its 0.02: with 0.02 the blocks
    # barely change the residual stream and greedy generation repeats one token. Then noise on
    # LayerNorm parameters and biases so that a wrong mapping of any of them shows.
    embed_std, weight_std, bias_noise, ln_noise = 0.05, 0.2, 0.05, 0.1
    torch.manual_seed(0)
    model = GPT2Model(cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():
            is_ln = ".ln_" in name or name.startswith("ln_f.")
            if is_ln:
                p.fill_(1.0 if name.endswith("weight") else 0.0)
            elif name.endswith("bias"):
                p.zero_()
            elif name.startswith(("wte.", "wpe.")):
                p.normal_(0.0, embed_std)
            elif name.endswith("c_proj.weight"):
                p.normal_(0.0, weight_std / math.sqrt(2 * cfg["n_layer"]))
            else:
                p.normal_(0.0, weight_std)
        for name, p in model.named_parameters():
            is_ln = ".ln_" in name or name.startswith("ln_f.")
            if is_ln or name.endswith("bias"):
                p.add_((ln_noise if is_ln else bias_noise) * torch.randn_like(p))
    V = cfg["vocab_size"]
    input_ids = torch.randint(0, V, (2, 16))
    labels = torch.randint(0, V, (2, 16))
    prompt_ids = torch.randint(0, V, (1, 5))
    write_safetensors(os.path.join(OUT, "gpt2_tiny.safetensors"), model.state_dict(),
                      {"format": "pt", "config": json.dumps(cfg)})

    ref = copy.deepcopy(model).double()
    logits = ref(input_ids)
    loss = F.cross_entropy(logits.view(-1, V), labels.view(-1))
    loss.backward()
    expected = {"input_ids": input_ids, "labels": labels, "logits": logits, "loss": loss}
    for name, p in ref.named_parameters():
        expected["grad." + name] = p.grad
    ids, margins = prompt_ids, []
    with torch.no_grad():
        for _ in range(12):
            last = ref(ids)[0, -1]
            top2 = last.topk(2).values
            margins.append(float(top2[0] - top2[1]))
            ids = torch.cat([ids, last.argmax().view(1, 1)], dim=1)
    expected["prompt_ids"], expected["generated_ids"] = prompt_ids, ids[:, 5:]
    meta = {"config": json.dumps(cfg),
            "logits": "float64 forward of the float32 weights on input_ids, "
                      "logits = ln_f(h) @ wte.weight.T",
            "loss": "mean cross_entropy(logits.view(-1,96), labels.view(-1)) (no shifting)",
            "grad": "grad.<param> = d loss / d param (wte includes the tied LM head)",
            "generated_ids": "greedy argmax continuation of prompt_ids, 12 new tokens, "
                             "full forward each step"}
    write_safetensors(os.path.join(OUT, "gpt2_tiny_expected.safetensors"), expected, meta)
    n = sum(p.numel() for p in model.parameters())
    print(f"gpt2_tiny: {len(list(model.parameters()))} tensors, {n} parameters, "
          f"loss {loss.item():.17g}")
    print(f"  generated_ids {ids[0, 5:].tolist()}, smallest top-2 logit margin {min(margins):.3g}")


# ---------------------------------------------------------------------------------------------
# ResNet (torchvision layout; `width` replaces the base width 64)

def conv3x3(cin, cout, stride=1):
    return nn.Conv2d(cin, cout, kernel_size=3, stride=stride, padding=1, bias=False)


def conv1x1(cin, cout, stride=1):
    return nn.Conv2d(cin, cout, kernel_size=1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        identity = x if self.downsample is None else self.downsample(x)
        return self.relu(out + identity)


class Bottleneck(nn.Module):  # v1.5: the stride sits on the 3x3 conv
    expansion = 4

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = conv1x1(inplanes, planes)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = conv3x3(planes, planes, stride)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = conv1x1(planes, planes * self.expansion)
        self.bn3 = nn.BatchNorm2d(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        identity = x if self.downsample is None else self.downsample(x)
        return self.relu(out + identity)


class ResNet(nn.Module):
    def __init__(self, block, layers, width, num_classes):
        super().__init__()
        self.inplanes = width
        self.conv1 = nn.Conv2d(3, width, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(block, width, layers[0], 1)
        self.layer2 = self._make_layer(block, 2 * width, layers[1], 2)
        self.layer3 = self._make_layer(block, 4 * width, layers[2], 2)
        self.layer4 = self._make_layer(block, 8 * width, layers[3], 2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(8 * width * block.expansion, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def _make_layer(self, block, planes, blocks, stride):
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(conv1x1(self.inplanes, planes * block.expansion, stride),
                                       nn.BatchNorm2d(planes * block.expansion))
        layers = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * block.expansion
        layers += [block(self.inplanes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


# name: (block, layers, width, num_classes, after_keep, grad_skip). To keep tests/data/models
# within about 4 MB, only names starting with one of after_keep get after.* entries, and the
# parameters in grad_skip (resnet18_tiny's four 3x3 convs of layer4, 1 MB in float64) get no
# grad.* entry; a wrong backward through them still shows in the earlier layers' grads, and
# layer3 has convs of the same kinds.
RESNETS = {
    "resnet18_tiny": ("BasicBlock", [2, 2, 2, 2], 8, 10, ("conv1.", "bn1.", "layer2.0.", "fc."),
                      ("layer4.0.conv1.weight", "layer4.0.conv2.weight", "layer4.1.conv1.weight",
                       "layer4.1.conv2.weight")),
    "resnet50_tiny": ("Bottleneck", [3, 4, 6, 3], 4, 10, ("conv1.", "bn1.", "layer4.2.", "fc."),
                      ()),
}
LR, MOMENTUM, STEPS = 0.1, 0.9, 2


def make_resnet(name, seed):
    block, layers, width, num_classes, after_keep, grad_skip = RESNETS[name]
    torch.manual_seed(seed)
    model = ResNet({"BasicBlock": BasicBlock, "Bottleneck": Bottleneck}[block], layers, width,
                   num_classes)
    with torch.no_grad():  # non-trivial batch norm in eval mode
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.weight.copy_(1 + 0.1 * torch.randn_like(m.weight))
                m.bias.copy_(0.1 * torch.randn_like(m.bias))
                m.running_mean.copy_(0.1 * torch.randn_like(m.running_mean))
                m.running_var.copy_(0.5 + torch.rand_like(m.running_var))
                m.num_batches_tracked.zero_()
    images = torch.randn(2, 3, 32, 32)
    labels = torch.randint(0, num_classes, (2,))
    cfg = dict(block=block, layers=layers, width=width, num_classes=num_classes)
    write_safetensors(os.path.join(OUT, name + ".safetensors"), model.state_dict(),
                      {"format": "pt", "config": json.dumps(cfg)})

    expected = {"images": images, "labels": labels}
    ref = copy.deepcopy(model).double().eval()
    with torch.no_grad():
        expected["eval_logits"] = ref(images.double())
    ref = copy.deepcopy(model).double().train()
    opt = torch.optim.SGD(ref.parameters(), lr=LR, momentum=MOMENTUM)
    for step in range(STEPS):
        opt.zero_grad()
        logits = ref(images.double())
        loss = F.cross_entropy(logits, labels)
        loss.backward()
        if step == 0:
            expected["train_logits"], expected["train_loss"] = logits.detach(), loss.detach()
            for pname, p in ref.named_parameters():
                if pname not in grad_skip:
                    expected["grad." + pname] = p.grad.clone()
            first_loss = loss.item()
        opt.step()
    for key, t in ref.state_dict().items():
        if key.startswith(after_keep):
            expected["after." + key] = t
    meta = {"config": json.dumps(cfg),
            "eval_logits": "model.eval() forward of images (batch norm uses running stats)",
            "train_logits": "model.train() forward of images (batch statistics), first step",
            "train_loss": "mean cross_entropy(train_logits, labels), first step",
            "grad": "grad.<param> = d train_loss / d param, first step"
                    + ("" if not grad_skip else "; left out: " + ", ".join(grad_skip)),
            "after": f"after.<name> = parameters and batch-norm buffers (running_mean, "
                     f"running_var with unbiased batch variance, num_batches_tracked) after "
                     f"{STEPS} steps of torch.optim.SGD(lr={LR}, momentum={MOMENTUM}) in train "
                     f"mode on the same batch (step: zero_grad, forward, backward, step); "
                     f"batch-norm momentum 0.1",
            "lr": str(LR), "momentum": str(MOMENTUM), "steps": str(STEPS),
            "after_subset": "only names starting with " + ", ".join(after_keep)}
    write_safetensors(os.path.join(OUT, name + "_expected.safetensors"), expected, meta)
    params = list(model.parameters())
    print(f"{name}: {len(params)} parameter tensors, {sum(p.numel() for p in params)} "
          f"parameters, {len(model.state_dict())} state_dict entries, first train loss "
          f"{first_loss:.17g}")


# ---------------------------------------------------------------------------------------------
# Read-back check: an independent reader (struct only), then recompute the float64 forward from
# the stored float32 weights and compare with the stored references.

def read_safetensors(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    assert n % 8 == 0, path
    header = json.loads(raw[8:8 + n].decode())
    data, meta = raw[8 + n:], header.pop("__metadata__", {})
    fmt = {"F32": ("f", 4, torch.float32), "F64": ("d", 8, torch.float64),
           "I64": ("q", 8, torch.int64)}
    spans, out = [], {}
    for name, h in header.items():
        ch, size, dt = fmt[h["dtype"]]
        b, e = h["data_offsets"]
        count = math.prod(h["shape"])
        assert e - b == count * size and b % size == 0, name
        spans.append((b, e))
        vals = struct.unpack("<%d%s" % (count, ch), data[b:e])
        out[name] = torch.tensor(vals, dtype=dt).reshape(h["shape"])
    spans.sort()
    assert spans[0][0] == 0 and spans[-1][1] == len(data), path
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:])), path  # contiguous, no gaps
    return out, meta


def check():
    w, meta = read_safetensors(os.path.join(OUT, "gpt2_tiny.safetensors"))
    ex, _ = read_safetensors(os.path.join(OUT, "gpt2_tiny_expected.safetensors"))
    model = GPT2Model(json.loads(meta["config"])).double()
    assert set(w) == set(model.state_dict()), "gpt2 names"
    model.load_state_dict(w)
    assert set("grad." + k for k in w) <= set(ex), "gpt2 grads"
    with torch.no_grad():
        assert torch.allclose(model(ex["input_ids"]), ex["logits"], rtol=0, atol=1e-12)
    print(f"gpt2_tiny: read back OK, {len(w)} tensors, {sum(t.numel() for t in w.values())} "
          f"parameters, loss {ex['loss'].item():.17g}")
    for name in RESNETS:
        w, meta = read_safetensors(os.path.join(OUT, name + ".safetensors"))
        ex, _ = read_safetensors(os.path.join(OUT, name + "_expected.safetensors"))
        block, layers, width, num_classes = RESNETS[name][:4]
        model = ResNet({"BasicBlock": BasicBlock, "Bottleneck": Bottleneck}[block], layers,
                       width, num_classes).double()
        assert set(w) == set(model.state_dict()), name + " names"
        model.load_state_dict(w)
        model.eval()
        with torch.no_grad():
            got = model(ex["images"].double())
        assert torch.allclose(got, ex["eval_logits"], rtol=0, atol=1e-12), name
        print(f"{name}: read back OK, {len(w)} tensors, train loss {ex['train_loss'].item():.17g}")


def main():
    if "--check" in sys.argv:
        return check()
    os.makedirs(OUT, exist_ok=True)
    make_gpt2()
    for seed, name in enumerate(RESNETS, start=1):
        make_resnet(name, seed)
    total = 0
    for f in sorted(os.listdir(OUT)):
        if f.endswith(".safetensors"):
            size = os.path.getsize(os.path.join(OUT, f))
            total += size
            print(f"  {size:9d}  tests/data/models/{f}")
    print(f"  {total:9d}  total")


if __name__ == "__main__":
    main()
