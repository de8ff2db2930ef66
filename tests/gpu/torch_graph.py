# CUDA graphs with gmshim as PyTorch's allocator (PYTORCH_NO_CUDA_MEMORY_CACHING=1): capture a
# training step with torch.cuda.graph and replay it; the replayed result must equal the eager
# one. Without gmshim this capture fails (cudaMalloc/cudaFree during a capture).
import sys, torch, torch.nn as nn
torch.manual_seed(0)
dev = "cuda"
model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10)).to(dev)
static_x = torch.randn(64, 256, device=dev)
def fwd(x):
    return model(x).square().mean()
eager = [fwd(static_x * (i + 1)).item() for i in range(3)]
result = {}
try:
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            fwd(static_x)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    inp = static_x.clone()
    with torch.cuda.graph(g):
        out = fwd(inp)
    replay = []
    for i in range(3):
        inp.copy_(static_x * (i + 1))
        g.replay()
        replay.append(out.item())
    result["graph"] = "ok" if replay == eager else f"mismatch {replay} vs {eager}"
    del g, out
except Exception as e:
    result["graph"] = f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
if "--compile" not in sys.argv:
    print(" ".join(f"{k}={v!r}" for k, v in result.items()))
    sys.exit(0)
try:
    import torch._dynamo
    cm = torch.compile(fwd, mode="reduce-overhead")
    got = [cm(static_x * (i + 1)).item() for i in range(3)]
    got = [cm(static_x * (i + 1)).item() for i in range(3)]
    result["compile_reduce_overhead"] = "ok" if all(abs(a - b) <= 1e-5 * max(1, abs(b)) for a, b in zip(got, eager)) else f"mismatch {got} vs {eager}"
except Exception as e:
    result["compile_reduce_overhead"] = f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
print(" ".join(f"{k}={v!r}" for k, v in result.items()))
