"""PyTorch programs of three OOM causes, for `gmshim oom` on a GPU (scripts/gpu-causes runs each
under the preload, in GMSHIM_TORCH=own and in the default cache-kept mode, with
GMSHIM_DEVICE_LIMIT so that they fail within seconds):

  leak      a training-like loop that keeps a slice of every iteration's output   -> leak
  frag      a large workspace cut by smaller tensors, then asked for again        -> fragmentation
            (own mode; with PyTorch's cache on gmshim sees only its segments)
  toolarge  a model whose weights exceed the device, loaded after one mark        -> capacity

Prints "expected OOM" and exits 0 when the allocation fails, exits 1 when nothing failed."""
import ctypes
import sys

import torch

MiB = 1 << 20


def marker():
    try:
        fn = ctypes.CDLL(None).gmshim_mark
        fn.argtypes = [ctypes.c_char_p]
        return lambda label: fn(label.encode())
    except AttributeError:
        return lambda label: None


mark = marker()
dev = torch.device("cuda")


def leak():
    weights = torch.empty(256 * MiB // 4, device=dev)
    kept = []
    for step in range(10000):
        mark(f"step {step}")
        act = [torch.empty(64 * MiB // 4, device=dev) for _ in range(4)]
        out = act[-1] * 2
        kept.append(out[: 32 * MiB // 4].clone())  # the leak: a slice of every step is kept
        del act, out
    return weights


def frag():
    weights = torch.empty(768 * MiB // 4, device=dev)
    ws = torch.empty(768 * MiB // 4, device=dev)
    del ws  # cached: a whole free block
    small = [torch.empty(24 * MiB // 4, device=dev) for _ in range(24)]
    small = small[1::2]  # every second one is freed: holes inside the cached block
    ws = torch.empty(768 * MiB // 4, device=dev)  # the workspace again
    return weights, small, ws


def toolarge():
    mark("load")
    layers = [torch.nn.Linear(8192, 8192, device=dev) for _ in range(64)]  # 256 MiB each
    return layers


def main():
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    fn = {"leak": leak, "frag": frag, "toolarge": toolarge}.get(what)
    if not fn:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        fn()
    except (torch.OutOfMemoryError, RuntimeError) as e:  # own mode: torch.AcceleratorError
        if "out of memory" not in str(e).lower() and "memory allocation" not in str(e).lower():
            raise
        print(f"torch_causes {what}: the expected OOM ({type(e).__name__})")
        return 0
    print(f"torch_causes {what}: no OOM")
    return 1


if __name__ == "__main__":
    sys.exit(main())
