# A small training loop for the memory_viz comparison (tests/gpu/memviz_check.py): it records
# PyTorch's own memory snapshot (torch.cuda.memory._record_memory_history / _dump_snapshot)
# while gmshim, preloaded, writes its log of the same run. An MLP trains for some steps with a
# gmshim mark each, keeps one activation per step (a small leak), then asks for more memory than
# the device has (one OOM, caught). usage: memviz_torch.py SNAPSHOT.pickle [STEPS]
import ctypes
import sys

import torch

snapshot, steps = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 30
mark = getattr(ctypes.CDLL(None), "gmshim_mark", None)
recording = True
try:
    torch.cuda.memory._record_memory_history(max_entries=200000, stacks="python")
except Exception as e:  # some allocator settings do not record history
    recording = False
    print(f"memviz_torch: no PyTorch history: {type(e).__name__}: {e}")

model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1024)).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
kept = []
for step in range(steps):
    if mark:
        mark(f"step {step}".encode())
    x = torch.randn(256, 1024, device="cuda")
    loss = model(x).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    kept.append(torch.empty(1 << 20, device="cuda"))  # the leak: 4 MiB a step
try:
    torch.empty(1 << 46, dtype=torch.uint8, device="cuda")  # 64 TiB: more than any device
except Exception as e:
    print(f"memviz_torch: the planned OOM: {type(e).__name__}")
torch.cuda.synchronize()
if recording:
    try:
        torch.cuda.memory._dump_snapshot(snapshot)
        print(f"memviz_torch: wrote {snapshot}")
    except Exception as e:
        print(f"memviz_torch: no PyTorch snapshot: {type(e).__name__}: {e}")
print(f"memviz_torch: steps={steps} kept={len(kept)} loss={loss.item():.4f}")
