"""The card's ledger on a real GPU (scripts/gpu-ledger): modes
  hold GIB      hold GIB of the GPU and sleep (the other process)
  job STEPS     a training job with cuBLAS (matmuls), a CUDA graph, and NCCL (one rank; gloo
                when NCCL is not there), marks each step, then prints 'step_ms=...'
  oom           the job, then tensors until the GPU is full: the expected OOM, 'oom=1'
"""
import os
import sys
import time

import torch


def hold(gib):
    x = torch.empty(int(gib * (1 << 30)), dtype=torch.uint8, device="cuda")
    x.fill_(1)
    torch.cuda.synchronize()
    print("holding", flush=True)
    time.sleep(600)


def mark(label):
    try:
        import ctypes
        ctypes.CDLL(None).gmshim_mark(label.encode())
    except (OSError, AttributeError):
        pass


def job(steps):
    import torch.distributed as dist
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29531")
    backend = "nccl" if dist.is_nccl_available() else "gloo"
    dist.init_process_group(backend, rank=0, world_size=1)
    model = torch.nn.Sequential(*[torch.nn.Linear(4096, 4096) for _ in range(8)]).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(256, 4096, device="cuda")
    static_in = torch.randn(256, 4096, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            model(static_in)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = model(static_in)
    times = []
    for i in range(steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        loss = model(x).square().mean()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
        opt.step()
        opt.zero_grad(set_to_none=True)
        graph.replay()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        mark("step")
    times.sort()
    print(f"step_ms={1000 * times[len(times) // 2]:.3f} backend={backend} out={float(static_out.sum()):.1f}",
          flush=True)
    return dist


def main():
    mode = sys.argv[1]
    if mode == "hold":
        hold(float(sys.argv[2]))
    elif mode == "job":
        job(int(sys.argv[2])).destroy_process_group()
    elif mode == "oom":
        dist = job(5)
        keep = []
        try:
            while True:
                keep.append(torch.empty(1 << 30, dtype=torch.uint8, device="cuda"))
        except (torch.OutOfMemoryError, RuntimeError) as e:
            print(f"oom=1 after {len(keep)} GiB: {str(e)[:80]}", flush=True)
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
