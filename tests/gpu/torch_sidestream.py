# PyTorch's documented hazard: a tensor used on a side stream and freed without record_stream,
# then a new tensor allocated at once. A pool that keeps cudaFree's guarantee reads no corrupted
# data; PyTorch's own cache does (that is why record_stream exists).
import sys, torch
N = 1 << 24
trials = 20
s = torch.cuda.Stream()
bad = 0
for t in range(trials):
    x = torch.ones(N, device="cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(s):
        torch.cuda._sleep(20_000_000)  # ~10 ms of spinning before the read
        total = x.sum()
    del x  # no record_stream
    z = torch.zeros(N, device="cuda")  # may get x's memory; zeros written at once
    torch.cuda.synchronize()
    bad += int(total.item() != N)
    del z, total
print(f"sidestream_trials={trials} corrupted={bad}")
