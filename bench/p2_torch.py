# P2/P3/P4: a PyTorch workload's train-step time and memory, for whichever allocator the
# environment selects (PyTorch's cache; PYTORCH_NO_CUDA_MEMORY_CACHING=1; either under gmshim).
# Prints one JSON object: step times per block of steps (median and spread), peak memory as
# PyTorch and gmshim see it, and gmshim's reuse-ordering figures.
#   python3 bench/p2_torch.py resnet50|gpt2|vit|empty [--blocks 6] [--block-steps 5] [--device N]
# P2_EMPTY_TRACKER=BRIDGE.so: that bridge attached with a callback doing nothing (PyTorch's cost).
# --device N: torch.cuda.set_device(N) first and everything on cuda:N (a torchrun rank's view when
# every GPU is visible).
import argparse, json, os, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gmshim_stats
import torch

ap = argparse.ArgumentParser()
ap.add_argument("workload", choices=["resnet50", "gpt2", "vit", "empty"])
ap.add_argument("--blocks", type=int, default=6)
ap.add_argument("--block-steps", type=int, default=5)
ap.add_argument("--warmup", type=int, default=5)
ap.add_argument("--batch", type=int, default=0)
ap.add_argument("--device", type=int, default=None)
args = ap.parse_args()
dev = "cuda"
gm_dev = 0
if args.device is not None:
    torch.cuda.set_device(args.device)
    dev = gm_dev = args.device
torch.manual_seed(0)
out = {"bench": "p2", "workload": args.workload,
       "uncached": os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING") == "1",
       "gmshim": gmshim_stats.stats(gm_dev) is not None, "device": gm_dev}


def median(xs):
    s = sorted(xs)
    return s[len(s) // 2]


if args.workload == "empty":
    # torch.empty(1 MiB) + del from Python: the allocator round trip as a user sees it.
    n = 20000
    for _ in range(2000):
        x = torch.empty(1 << 20, dtype=torch.uint8, device=dev)
        del x
    times = []
    for _ in range(7):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            x = torch.empty(1 << 20, dtype=torch.uint8, device=dev)
            del x
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) / n * 1e6)
    out.update({"empty_del_us": median(times), "min_us": min(times), "max_us": max(times)})
else:
    if args.workload in ("resnet50", "vit"):
        import torchvision
        if args.workload == "resnet50":
            model = torchvision.models.resnet50(weights=None).to(dev)
            batch = args.batch or 128
        else:  # ViT-B/16: bound by the CPU's kernel launches at this batch
            model = torchvision.models.vit_b_16(weights=None).to(dev)
            batch = args.batch or 64
        x = torch.randn(batch, 3, 224, 224, device=dev)
        y = torch.randint(0, 1000, (batch,), device=dev)

        def loss_fn():
            return torch.nn.functional.cross_entropy(model(x), y)
    else:
        from transformers import GPT2Config, GPT2LMHeadModel
        model = GPT2LMHeadModel(GPT2Config()).to(dev)
        batch = args.batch or 16
        ids = torch.randint(0, 50257, (batch, 1024), device=dev)

        def loss_fn():
            return model(input_ids=ids, labels=ids).loss
    out["batch"] = batch
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    if os.environ.get("P2_EMPTY_TRACKER"):
        # PyTorch's own cost of a trace tracker: the bridge attached with a callback that does
        # nothing (libc's abs, which reads no memory), no gmshim.
        import ctypes
        bridge = ctypes.CDLL(os.environ["P2_EMPTY_TRACKER"])
        nothing = ctypes.cast(ctypes.CDLL(None).abs, ctypes.c_void_p)
        bridge.gmshim_torch_bridge_attach.argtypes = [ctypes.c_void_p]
        out["empty_tracker"] = bridge.gmshim_torch_bridge_attach(nothing) == 0

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_fn()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    times, cpu = [], []
    before = gmshim_stats.stats(gm_dev)
    for b in range(args.blocks):
        gmshim_stats.mark(f"block {b}")
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(args.block_steps):
            loss = step()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) / args.block_steps * 1e3)
        # The process's CPU time a step, every thread (autograd's too); it includes the runtime's
        # spin in the block's synchronize, so it reads as CPU-bound only where it nears the step.
        cpu.append((time.process_time() - c0) / args.block_steps * 1e3)
    out.update({"step_ms": median(times), "min_ms": min(times), "max_ms": max(times), "blocks_ms": times,
                "cpu_ms": median(cpu), "blocks_cpu_ms": cpu, "loss": float(loss)})
    after = gmshim_stats.stats(gm_dev)
    if before and after:
        # What the timed steps spent recording and polling fences (the runtime calls alone).
        steps = args.blocks * args.block_steps
        out["gm_step"] = {k + "_per_step": (after[k] - before[k]) / steps for k in ("fences", "fence_polls")}
        out["gm_step"].update({k.replace("_ns", "_ms") + "_per_step": (after[k] - before[k]) / steps / 1e6
                               for k in ("fence_ns", "fence_poll_ns")})
    out["torch_max_allocated"] = torch.cuda.max_memory_allocated()
    out["torch_max_reserved"] = torch.cuda.max_memory_reserved()
st = gmshim_stats.stats(gm_dev)
if st:
    out["gm"] = {"peak_requested": st["requested"]["peak"], "peak_allocated": st["allocated"]["peak"],
                 "peak_reserved": st["reserved"]["peak"], "peak_pending": st["pending"]["peak"],
                 "allocs": st["allocs"], "hits": st["cache_hits"], "misses": st["cache_misses"],
                 "driver_mallocs": st["driver_mallocs"], "fences": st["fences"],
                 "fence_waits": st["fence_waits"], "fence_wait_ms": st["fence_wait_ns"] / 1e6,
                 "fence_ms": st["fence_ns"] / 1e6, "fence_polls": st["fence_polls"],
                 "fence_poll_ms": st["fence_poll_ns"] / 1e6,
                 "arenas": st["arenas"]}
    if st["requested"]["peak"]:
        out["gm"]["reserved_over_requested"] = st["reserved"]["peak"] / st["requested"]["peak"]
        out["gm"]["reserved_over_allocated"] = st["reserved"]["peak"] / st["allocated"]["peak"]
if out.get("torch_max_allocated"):
    out["torch_reserved_over_allocated"] = out["torch_max_reserved"] / out["torch_max_allocated"]
print(json.dumps(out))
