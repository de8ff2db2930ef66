# One training run for scripts/gpu-plan (issue 48): ResNet-50, a GPT-2-like model or ViT-B/16
# (torchvision's, attention on the math path so that its backward is deterministic), deterministic,
# every loss printed as a hex float (runs under PyTorch's cache and under gmshim's plan compared
# bit for bit), then one JSON line: the median step time over blocks of steps after the warm-up,
# PyTorch's peak reserved (its cache), gmshim's peak reserved and the plan's counters (own mode).
#   python3 tests/gpu/torch_plan.py resnet50|gpt2|vit [--steps 40] [--warmup 10] [--batch N] [--fraction F]
import argparse, json, os, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import gmshim_stats
import torch

ap = argparse.ArgumentParser()
ap.add_argument("workload", choices=["resnet50", "gpt2", "vit"])
ap.add_argument("--steps", type=int, default=40)
ap.add_argument("--warmup", type=int, default=10)
ap.add_argument("--batch", type=int, default=0)
ap.add_argument("--fraction", type=float, default=0.0, help="torch.cuda.set_per_process_memory_fraction first")
args = ap.parse_args()
if args.fraction:
    torch.cuda.set_per_process_memory_fraction(args.fraction)
torch.manual_seed(0)
torch.use_deterministic_algorithms(True)  # needs CUBLAS_WORKSPACE_CONFIG=:4096:8
torch.backends.cudnn.benchmark = False
dev = "cuda"
if args.workload == "resnet50":
    import torchvision
    model = torchvision.models.resnet50(weights=None).to(dev)
    batch = args.batch or 64
    g = torch.Generator(device="cpu").manual_seed(1)
    x = torch.randn(batch, 3, 224, 224, generator=g).to(dev)
    y = torch.randint(0, 1000, (batch,), generator=g).to(dev)

    def loss_fn():
        return torch.nn.functional.cross_entropy(model(x), y)
elif args.workload == "vit":
    import torchvision
    torch.backends.cuda.enable_flash_sdp(False)  # flash and memory-efficient attention's backward
    torch.backends.cuda.enable_mem_efficient_sdp(False)  # are not deterministic; the math path is
    model = torchvision.models.vit_b_16(weights=None).to(dev)
    batch = args.batch or 64
    g = torch.Generator(device="cpu").manual_seed(1)
    x = torch.randn(batch, 3, 224, 224, generator=g).to(dev)
    y = torch.randint(0, 1000, (batch,), generator=g).to(dev)

    def loss_fn():
        return torch.nn.functional.cross_entropy(model(x), y)
else:
    try:
        from transformers import GPT2Config, GPT2LMHeadModel
        model = GPT2LMHeadModel(GPT2Config(n_layer=6, attn_pdrop=0.0, embd_pdrop=0.0, resid_pdrop=0.0)).to(dev)
        head = "transformers GPT2LMHeadModel, 6 layers"
    except ImportError:  # the same shape from torch alone: embeddings, pre-norm blocks, tied head
        class Block(torch.nn.Module):
            def __init__(self, d=768, h=12):
                super().__init__()
                self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
                self.attn = torch.nn.MultiheadAttention(d, h, batch_first=True)
                self.mlp = torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(), torch.nn.Linear(4 * d, d))

            def forward(self, t, mask):
                a = self.ln1(t)
                t = t + self.attn(a, a, a, attn_mask=mask, need_weights=False)[0]
                return t + self.mlp(self.ln2(t))

        class GPT(torch.nn.Module):
            def __init__(self, vocab=50257, ctx=1024, d=768, n=6):
                super().__init__()
                self.wte, self.wpe = torch.nn.Embedding(vocab, d), torch.nn.Embedding(ctx, d)
                self.blocks = torch.nn.ModuleList(Block(d) for _ in range(n))
                self.ln = torch.nn.LayerNorm(d)

            def forward(self, ids):
                T = ids.shape[1]
                mask = torch.triu(torch.full((T, T), float("-inf"), device=ids.device), 1)
                t = self.wte(ids) + self.wpe(torch.arange(T, device=ids.device))
                for b in self.blocks:
                    t = b(t, mask)
                return self.ln(t) @ self.wte.weight.t()

        model = GPT().to(dev)
        head = "torch-only GPT-2-like, 6 layers"
    batch = args.batch or 8
    g = torch.Generator(device="cpu").manual_seed(1)
    ids = torch.randint(0, 50257, (batch, 1024), generator=g).to(dev)

    def loss_fn():
        out = model(input_ids=ids, labels=ids) if hasattr(model, "config") else None
        if out is not None:
            return out.loss
        logits = model(ids)
        return torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)


def step():
    loss = loss_fn()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss


losses = []
for _ in range(args.warmup):
    losses.append(step().item().hex())
torch.cuda.synchronize()
times = []
block = 5
for b in range(max(1, args.steps // block)):
    t0 = time.perf_counter()
    for _ in range(block):
        loss = step()
    torch.cuda.synchronize()
    times.append((time.perf_counter() - t0) / block * 1e3)
    losses.append(loss.item().hex())  # the block's last loss: each .item() would sync every step
for h in losses:
    print("loss", h)
out = {"workload": args.workload, "batch": batch, "step_ms": sorted(times)[len(times) // 2],
       "blocks_ms": times, "torch_max_reserved": torch.cuda.max_memory_reserved(),
       "torch_max_allocated": torch.cuda.max_memory_allocated()}
if args.workload == "gpt2":
    out["model"] = head
st = gmshim_stats.stats()
if st:
    out["gm"] = {"peak_reserved": st["reserved"]["peak"], "peak_allocated": st["allocated"]["peak"],
                 "reserved": st["reserved"]["current"], "allocs": st["allocs"]}
    out["gm"].update({k: st[k] for k in ("fences", "fence_waits", "fence_wait_ns", "fence_ns", "fence_polls",
                                         "fence_poll_ns", "driver_mallocs", "driver_frees")})
    out["gm"].update({k: st[k] for k in ("plan_allocs", "plan_online", "plan_busy", "plan_period", "plan_bytes")})
print(json.dumps(out))
