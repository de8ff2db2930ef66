"""GMSHIM_TORCH=own with NCCL (its own static runtime creates its streams below the shared runtime's
hooks): one rank all-reduces tensors from gmshim's pool while they are freed and reallocated;
the sums must be exact. Prints nccl_ok=1 and the steps' mean time."""
import os, sys, time, tempfile
import torch
import torch.distributed as dist

store = tempfile.mktemp()
dist.init_process_group("nccl", init_method="file://" + store, rank=0, world_size=1)
torch.cuda.set_device(0)
side = torch.cuda.Stream()
bad = 0
t0 = time.time()
for i in range(200):
    x = torch.full((1 << 20,), float(i), device="cuda")
    with torch.cuda.stream(side):
        side.wait_stream(torch.cuda.current_stream())
        dist.all_reduce(x)
        y = x * 2
    torch.cuda.current_stream().wait_stream(side)
    x.record_stream(side)
    del x
    z = torch.empty((1 << 20,), device="cuda").fill_(-1.0)  # may reuse x's block
    if float(y[0]) != 2.0 * i or float(z[0]) != -1.0:
        bad += 1
    del y, z
torch.cuda.synchronize()
dist.destroy_process_group()
print(f"nccl_ok={int(bad == 0)} bad={bad} mean_step_ms={(time.time() - t0) / 200 * 1e3:.3f}")
