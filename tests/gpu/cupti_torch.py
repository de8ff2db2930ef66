# PyTorch under LD_PRELOAD=libgmshim.so with GMSHIM_CUPTI=1 and PYTORCH_NO_CUDA_MEMORY_CACHING=1:
# gmshim's hooks see every tensor; CUPTI must add what the libraries with their own private
# runtime take from the driver (cuBLAS/cuBLASLt, cuDNN, NCCL), logged as foreign and named
# after the library. "foreign": a matmul, a convolution and a one-rank NCCL all-reduce.
# "loop N": N steps of a small model, the mean step time (docs/cupti.md: the cost).
import os
import sys
import time

import torch

mode = sys.argv[1] if len(sys.argv) > 1 else "foreign"
dev = "cuda"

if mode == "foreign":
    a = torch.randn(2048, 2048, device=dev)
    b = a @ a                                          # cuBLAS (and its workspace)
    c = torch.nn.functional.linear(a.half(), a.half()) # cuBLASLt
    x = torch.randn(8, 16, 64, 64, device=dev)
    conv = torch.nn.Conv2d(16, 32, 3).to(dev)
    y = conv(x)                                        # cuDNN
    torch.cuda.synchronize()
    nccl = "skipped"
    try:
        import torch.distributed as dist
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29571")
        dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device(dev, 0))
        t = torch.ones(1 << 20, device=dev)
        dist.all_reduce(t)                             # NCCL's buffers
        torch.cuda.synchronize()
        dist.destroy_process_group()
        nccl = "ok"
    except Exception as e:  # no NCCL, or it cannot start: the other checks stand
        nccl = f"failed ({type(e).__name__}: {str(e).splitlines()[0][:80]})"
    print(f"matmul={float(b[0, 0]):.1f} linear={float(c[0, 0]):.1f} conv={tuple(y.shape)} nccl={nccl}")
elif mode == "loop":
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1024)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(256, 1024, device=dev)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = model(x).square().mean()
        loss.backward()
        opt.step()

    for _ in range(20):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    print(f"steps={steps} ms_per_step={(time.perf_counter() - t0) * 1e3 / steps:.3f}")
else:
    sys.exit(f"usage: {sys.argv[0]} foreign | loop N")
