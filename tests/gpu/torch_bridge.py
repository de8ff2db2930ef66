"""PyTorch programs for scripts/gpu-torch-bridge, unmodified by gmshim: each prints one line of
`key=value` figures that the script compares with and without the preload.

  train STEPS   ResNet-50 (torchvision, else a small CNN), AMP bf16, AdamW: median step ms,
                memory_allocated, max_memory_reserved, a loss digest, PyTorch's own allocation count
  oom           one allocation larger than the device: the exception's type
  leak N [kill] N iterations that each keep a 4 MiB tensor (and free a temporary); with kill the
                process SIGKILLs itself after printing its figures
  workers       a DataLoader with 2 worker processes that never touch CUDA
  wrap N        8 tensors of 4 MiB kept from the start, then N small tensors allocated and freed
                (with a small GMSHIM_LOG_LIMIT the log wraps: the kept ones are before the wrap)
"""
import ctypes
import hashlib
import os
import signal
import statistics
import sys
import time

import torch


def stats_line(extra):
    # A mark where the statistics are read: the log's counts up to here are comparable (the
    # tensors freed at exit come after).
    import ctypes
    lib = ctypes.CDLL(None)
    if hasattr(lib, "gmshim_mark"):
        torch.cuda.synchronize()
        lib.gmshim_mark(b"stats")
    s = torch.cuda.memory_stats()
    lib = ctypes.CDLL(None)
    if hasattr(lib, "gmshim_mark"):  # under the preload: the log's state at the figures' instant
        lib.gmshim_mark(b"figures")
    figures = dict(extra)
    figures.update(
        allocated=torch.cuda.memory_allocated(),
        reserved=torch.cuda.memory_reserved(),
        max_reserved=torch.cuda.max_memory_reserved(),
        allocs=s.get("allocation.all.allocated", 0),
        frees=s.get("allocation.all.freed", 0),
        segments=s.get("segment.all.allocated", 0),
    )
    print(" ".join(f"{k}={v}" for k, v in figures.items()), flush=True)


def model():
    try:
        import torchvision

        return torchvision.models.resnet50(), 224, "resnet50"
    except Exception:
        layers, c = [], 3
        for width in (64, 128, 256, 512):
            layers += [torch.nn.Conv2d(c, width, 3, padding=1), torch.nn.BatchNorm2d(width), torch.nn.ReLU(),
                       torch.nn.Conv2d(width, width, 3, padding=1, stride=2), torch.nn.ReLU()]
            c = width
        layers += [torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(c, 1000)]
        return torch.nn.Sequential(*layers), 128, "cnn"


def train(steps):
    torch.manual_seed(0)
    net, side, name = model()
    net = net.cuda()
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
    x = torch.randn(64, 3, side, side, device="cuda")
    y = torch.randint(0, 1000, (64,), device="cuda")
    digest, times = hashlib.sha256(), []
    for i in range(steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(net(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
        digest.update(loss.detach().float().cpu().numpy().tobytes())
    warm = times[steps // 3:]
    stats_line({"model": name, "step_ms": f"{statistics.median(warm):.3f}", "loss": digest.hexdigest()[:16]})


def oom():
    torch.zeros(1, device="cuda")
    total = torch.cuda.get_device_properties(0).total_memory
    try:
        torch.empty(total * 2, dtype=torch.uint8, device="cuda")
        kind = "none"
    except Exception as e:  # the type is the figure
        kind = type(e).__name__
    stats_line({"exception": kind})


def leak(n, kill):
    kept = []
    for i in range(n):
        tmp = torch.ones(1 << 18, device="cuda")      # 1 MiB, freed each iteration
        kept.append(torch.empty(1 << 20, device="cuda"))  # 4 MiB, kept: the leak
        del tmp
    torch.cuda.synchronize()
    stats_line({"kept": len(kept)})
    if kill:
        os.kill(os.getpid(), signal.SIGKILL)


def wrap(n):
    kept = [torch.empty(1 << 20, device="cuda") for _ in range(8)]  # 32 MiB, live to the end
    for _ in range(n):
        t = torch.empty(256, device="cuda")
        del t
    torch.cuda.synchronize()
    stats_line({"kept": len(kept)})


def workers():
    torch.zeros(1, device="cuda")
    data = torch.utils.data.TensorDataset(torch.arange(64.0))
    loader = torch.utils.data.DataLoader(data, batch_size=8, num_workers=2)
    total = sum(float(b[0].sum()) for b in loader)
    stats_line({"sum": total})


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "train":
        train(int(sys.argv[2]))
    elif what == "oom":
        oom()
    elif what == "leak":
        leak(int(sys.argv[2]), len(sys.argv) > 3 and sys.argv[3] == "kill")
    elif what == "workers":
        workers()
    elif what == "wrap":
        wrap(int(sys.argv[2]))
    else:
        sys.exit(f"unknown program {what}")
