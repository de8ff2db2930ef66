"""PyTorch as people configure it, for scripts/gpu-torch-configs: the programs run under each
PYTORCH_CUDA_ALLOC_CONF the script sets, with or without gmshim. Each prints one last line of
key=value figures read from PyTorch (its own statistics, read after a mark "stats" when gmshim
is there, so that the log's records before the mark are those PyTorch counted).

  torch_configs.py frag N          N rounds of a 2 MiB tensor kept between 40 MiB ones, the 40 MiB
                                   ones freed, then 64 MiB ones asked
  torch_configs.py leak MIB [F [nomark]]
                                   a loop keeping MIB MiB a step (a scratch tensor freed each step)
                                   until OutOfMemoryError; F: set_per_process_memory_fraction(F)
                                   (0: none); nomark: no gmshim mark a step, as most scripts
  torch_configs.py train STEPS B   a ResNet-50 (torch.nn only, bottleneck blocks [3, 4, 6, 3]) on
                                   random data, batch B, AMP bf16, SGD; step_ms = the median step
  torch_configs.py leaktrain MIB [MS [GIB]]  an MLP training loop without marks that keeps MIB
                                   MiB of one activation a step (a clone) until out of memory
                                   (exception=OutOfMemoryError, or AcceleratorError in own mode); each
                                   step prints "step N T R" to stderr (T: time.time(), R: PyTorch's
                                   reserved MiB) so that a line the shim prints can be placed; MS: a
                                   sleep per step; GIB: a tensor of GIB GiB made and freed first (a
                                   cached segment the steps reuse)
  torch_configs.py gpt STEPS B     a GPT-2-small-like stack (12 nn.TransformerEncoderLayer, d 768,
                                   12 heads, causal, sequence 512, vocabulary 50257), batch B,
                                   AMP bf16, AdamW; a steady job; step_ms = the median step
  torch_configs.py gpt2 STEPS B    a GPT-2-small-like decoder (12 pre-norm layers, 768 wide, 12
                                   heads, 1024 tokens, vocabulary 50257) on random tokens, AMP
                                   bf16, AdamW
  torch_configs.py vit STEPS B     a ViT-B/16-like encoder (16x16 patches of 224x224 images, 12
                                   layers, 768 wide) on random images, AMP bf16, AdamW
"""
import ctypes
import statistics
import sys
import time

import torch
import torch.nn as nn

LIB = ctypes.CDLL(None)
MARK = getattr(LIB, "gmshim_mark", None)


def mark(label):
    if MARK:
        MARK(label.encode())


def stats(**extra):
    mark("stats")
    s = torch.cuda.memory_stats()
    fig = dict(allocs=s.get("allocation.all.allocated", 0), frees=s.get("allocation.all.freed", 0),
               max_allocated=torch.cuda.max_memory_allocated(), max_reserved=torch.cuda.max_memory_reserved(),
               ooms=s.get("num_ooms", 0))
    fig.update(extra)
    print(" ".join(f"{k}={v}" for k, v in fig.items()), flush=True)


def frag(n):
    small, big = [], []
    for _ in range(n):
        big.append(torch.empty(40 << 20, dtype=torch.uint8, device="cuda"))
        small.append(torch.empty(2 << 20, dtype=torch.uint8, device="cuda"))
    del big
    after = [torch.empty(64 << 20, dtype=torch.uint8, device="cuda") for _ in range(n // 2)]
    torch.cuda.synchronize()
    stats(kept=len(small) + len(after))


def leak(mib, fraction, marked=True):
    if fraction:
        torch.cuda.set_per_process_memory_fraction(fraction)
    kept, step = [], 0
    try:
        while True:
            if marked:
                mark("step")
            scratch = torch.empty(mib << 19, dtype=torch.uint8, device="cuda")
            kept.append(torch.empty(mib << 20, dtype=torch.uint8, device="cuda"))  # LEAK_LINE
            del scratch
            step += 1
            if not marked:  # where a warning on the same stream came (scripts/gpu-warn-top)
                print(f"step {step}", file=sys.stderr, flush=True)
    except torch.OutOfMemoryError:
        stats(exception="OutOfMemoryError", step=step, line=leak_line())


def leak_line(tag="# LEAK_LINE"):
    src = open(__file__).read().splitlines()
    return next(i + 1 for i, l in enumerate(src) if l.rstrip().endswith(tag))


class Bottleneck(nn.Module):
    def __init__(self, cin, mid, stride):
        super().__init__()
        cout = mid * 4
        self.body = nn.Sequential(
            nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(inplace=True),
            nn.Conv2d(mid, mid, 3, stride, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(inplace=True),
            nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.short = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                      if stride != 1 or cin != cout else nn.Identity())

    def forward(self, x):
        return torch.relu(self.body(x) + self.short(x))


def resnet50(classes=1000):
    layers, cin = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
                   nn.MaxPool2d(3, 2, 1)], 64
    for mid, n, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(n):
            layers.append(Bottleneck(cin, mid, stride if i == 0 else 1))
            cin = mid * 4
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes)]
    return nn.Sequential(*layers)


def train(steps, batch):
    torch.manual_seed(0)
    model = resnet50().cuda().to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(batch, 3, 224, 224, device="cuda").to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (batch,), device="cuda")
    times = []
    for i in range(steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        if i >= 3:
            times.append((time.perf_counter() - t0) * 1000)
    stats(step_ms=f"{statistics.median(times):.3f}", loss=f"{loss.item():.4f}")


def leaktrain(mib, sleep_ms, cache_gib):
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = True
    # One hidden activation is 256 MiB in fp32; a step's activations and gradients come and go
    # (about 2 GiB), so that the low-water troughs stay clear while the kept bytes grow.
    dim, hidden, batch = 1024, 4096, 16384
    if cache_gib:
        # One large block freed at once: PyTorch keeps its segment and splits it for the steps, so
        # that its reserved bytes stay flat for the first steps of the leak.
        big = torch.empty(int(cache_gib * (1 << 30)), dtype=torch.uint8, device="cuda")
        del big
    model = nn.Sequential(*[nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(), nn.Linear(hidden, dim))
                            for _ in range(4)]).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(batch, dim, device="cuda")
    rows = min(batch, max(1, (mib << 20) // (hidden * 4)))
    kept, step = [], 0
    try:
        while True:
            h = model[0][1](model[0][0](x))
            kept.append(h.detach()[:rows].clone())  # LEAKTRAIN_LINE
            loss = model[1:](model[0][2](h)).square().mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            del h, loss
            torch.cuda.synchronize()
            step += 1
            print(f"step {step} {time.time():.3f} {torch.cuda.memory_reserved() >> 20}", file=sys.stderr,
                  flush=True)
            if sleep_ms:
                time.sleep(sleep_ms / 1000)
    except RuntimeError as e:  # torch.OutOfMemoryError; under GMSHIM_TORCH=own AcceleratorError
        if not isinstance(e, torch.OutOfMemoryError) and "out of memory" not in str(e):
            raise
        print(f"oom at step {step} {time.time():.3f}", file=sys.stderr, flush=True)
        kept.clear()
        stats(exception=type(e).__name__, step=step, line=leak_line("# LEAKTRAIN_LINE"),
              kept_mib=rows * hidden * 4 >> 20)


def gpt(steps, batch):
    torch.manual_seed(0)
    vocab, d, seq = 50257, 768, 512
    layer = nn.TransformerEncoderLayer(d, 12, 4 * d, dropout=0.1, activation="gelu", batch_first=True,
                                       norm_first=True)
    model = nn.ModuleDict(dict(emb=nn.Embedding(vocab, d), pos=nn.Embedding(seq, d),
                               body=nn.TransformerEncoder(layer, 12, enable_nested_tensor=False),
                               norm=nn.LayerNorm(d), head=nn.Linear(d, vocab, bias=False))).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    mask = nn.Transformer.generate_square_subsequent_mask(seq, device="cuda")
    pos = torch.arange(seq, device="cuda")
    times = []
    for i in range(steps):
        tokens = torch.randint(0, vocab, (batch, seq + 1), device="cuda")
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            h = model["emb"](tokens[:, :-1]) + model["pos"](pos)
            h = model["body"](h, mask=mask, is_causal=True)
            logits = model["head"](model["norm"](h))
            loss = nn.functional.cross_entropy(logits.float().view(-1, vocab), tokens[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        if i >= 3:
            times.append((time.perf_counter() - t0) * 1000)
    stats(step_ms=f"{statistics.median(times):.3f}", loss=f"{loss.item():.4f}")


class Gpt2(nn.Module):
    def __init__(self, vocab=50257, ctx=1024, width=768, layers=12, heads=12):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, width), nn.Embedding(ctx, width)
        layer = nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.1, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm, self.head = nn.LayerNorm(width), nn.Linear(width, vocab, bias=False)
        self.head.weight = self.tok.weight

    def forward(self, ids):
        n = ids.shape[1]
        x = self.tok(ids) + self.pos(torch.arange(n, device=ids.device))
        mask = nn.Transformer.generate_square_subsequent_mask(n, device=ids.device)
        return self.head(self.norm(self.blocks(x, mask=mask, is_causal=True)))


class Vit(nn.Module):
    def __init__(self, classes=1000, width=768, layers=12, heads=12, patch=16, image=224):
        super().__init__()
        self.patch = nn.Conv2d(3, width, patch, patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, width))
        self.pos = nn.Parameter(torch.zeros(1, (image // patch) ** 2 + 1, width))
        layer = nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.1, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm, self.head = nn.LayerNorm(width), nn.Linear(width, classes)

    def forward(self, img):
        x = self.patch(img).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
        return self.head(self.norm(self.blocks(x))[:, 0])


def fit(model, make_batch, loss_of, steps):
    """Trains `steps` steps with AMP bf16 and AdamW; prints the figures with the median step."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    times = []
    for i in range(steps):
        x, y = make_batch()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_of(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        if i >= 3:
            times.append((time.perf_counter() - t0) * 1000)
    stats(step_ms=f"{statistics.median(times):.3f}", loss=f"{loss.item():.4f}")
    stats(step_ms=f"{statistics.median(times or [0.0]):.3f}", loss=f"{loss.item():.4f}")


def gpt2(steps, batch, ctx=1024, vocab=50257):
    torch.manual_seed(0)
    model = Gpt2(vocab, ctx).cuda()

    def make_batch():
        ids = torch.randint(0, vocab, (batch, ctx + 1), device="cuda")
        return ids[:, :-1], ids[:, 1:]

    fit(model, make_batch, lambda out, y: nn.functional.cross_entropy(out.flatten(0, 1), y.flatten()), steps)


def vit(steps, batch):
    torch.manual_seed(0)
    model = Vit().cuda()

    def make_batch():
        return (torch.randn(batch, 3, 224, 224, device="cuda"),
                torch.randint(0, 1000, (batch,), device="cuda"))

    fit(model, make_batch, nn.functional.cross_entropy, steps)


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "frag":
        frag(int(sys.argv[2]))
    elif mode == "leak":
        leak(int(sys.argv[2]), float(sys.argv[3]) if len(sys.argv) > 3 else 0.0,
             len(sys.argv) <= 4 or sys.argv[4] != "nomark")
    elif mode == "train":
        train(int(sys.argv[2]), int(sys.argv[3]))
    elif mode == "leaktrain":
        leaktrain(int(sys.argv[2]), float(sys.argv[3]) if len(sys.argv) > 3 else 0.0,
                  float(sys.argv[4]) if len(sys.argv) > 4 else 0.0)
    elif mode == "gpt":
        gpt(int(sys.argv[2]), int(sys.argv[3]))
    elif mode == "gpt2":
        gpt2(int(sys.argv[2]), int(sys.argv[3]))
    elif mode == "vit":
        vit(int(sys.argv[2]), int(sys.argv[3]))
    else:
        sys.exit(f"unknown mode {mode}")
