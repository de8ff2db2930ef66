# A training-like loop that keeps one activation per iteration (a leak) until the device is
# full. Run with PYTORCH_NO_CUDA_MEMORY_CACHING=1 under gmshim: `gmshim oom` must name the leak
# and point at the line that allocates the kept tensors (marked LEAK below).
import ctypes, sys, torch
mark = getattr(ctypes.CDLL(None), "gmshim_mark", None)
dev = "cuda"
w = [torch.randn(32 << 20, device=dev) for _ in range(4)]  # persistent "weights" (512 MiB)
history = []
def step(x):
    h = x
    for m in w:
        h = torch.tanh(h * m)                  # per-iteration activations, freed each step
    return h
it = 0
try:
    while True:
        if mark:
            mark(f"iteration {it}".encode())
        x = torch.randn(32 << 20, device=dev)
        out = step(x)
        history.append(out * 1.0)              # LEAK: one 128 MiB tensor kept per iteration
        it += 1
except Exception as e:  # torch.AcceleratorError under PYTORCH_NO_CUDA_MEMORY_CACHING=1
    print(f"leak_oom_iterations={it} error={type(e).__name__}: {str(e).splitlines()[0]}")
    sys.exit(0)
