# A small deterministic training run; prints every loss as a hex float so that runs with and
# without gmshim can be compared bit for bit, then the step time and gmshim's statistics.
import ctypes, json, os, sys, time
import torch, torch.nn as nn

torch.manual_seed(0)
torch.use_deterministic_algorithms(True)
torch.backends.cudnn.benchmark = False
dev = "cuda"
model = nn.Sequential(
    nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(64 * 8 * 8, 256), nn.ReLU(), nn.Linear(256, 10)).to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
g = torch.Generator(device="cpu").manual_seed(1)
xs = [torch.randn(64, 3, 32, 32, generator=g) for _ in range(8)]
ys = [torch.randint(0, 10, (64,), generator=g) for _ in range(8)]
losses = []
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 30
torch.cuda.synchronize()
t0 = time.perf_counter()
for step in range(steps):
    x, y = xs[step % 8].to(dev), ys[step % 8].to(dev)
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    losses.append(loss.item().hex())
torch.cuda.synchronize()
dt = (time.perf_counter() - t0) / steps
out = {"losses": losses, "step_ms": dt * 1e3}
lib = ctypes.CDLL(None)
if hasattr(lib, "gmshim_get_stats"):
    class Stat(ctypes.Structure):
        _fields_ = [("current", ctypes.c_ulonglong), ("peak", ctypes.c_ulonglong), ("total", ctypes.c_ulonglong)]
    class Stats(ctypes.Structure):
        _fields_ = [("size", ctypes.c_uint), ("device", ctypes.c_int)] + \
            [(n, Stat) for n in ("requested", "allocated", "reserved", "cached", "pending")] + \
            [(n, ctypes.c_ulonglong) for n in ("allocs", "frees", "cache_hits", "cache_misses",
             "driver_mallocs", "driver_frees", "oom_retries", "ooms", "fences", "fence_waits", "fence_wait_ns",
             "unpooled_allocs", "foreign_frees", "bad_frees", "limit", "arenas")]
    st = Stats(); st.size = ctypes.sizeof(Stats)
    lib.gmshim_get_stats(0, ctypes.byref(st))
    out["gmshim"] = {"allocs": st.allocs, "hits": st.cache_hits, "misses": st.cache_misses,
                     "fences": st.fences, "fence_waits": st.fence_waits,
                     "peak_requested": st.requested.peak, "peak_reserved": st.reserved.peak,
                     "peak_pending": st.pending.peak}
print(json.dumps(out))
