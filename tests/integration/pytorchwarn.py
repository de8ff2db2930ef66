# GMSHIM_WARN with PyTorch's cache kept, from Python: the stand-in allocator of tests/fake_torch
# (built with expandable segments as a torch package's libc10_cuda.so, argv[1]) maps 1 GiB and
# hands out tensors from it by its trace events, as PyTorch does; steps of 25 ms without marks
# keep 16 MiB a step in train_step until the 2 GiB fake device is full, while the mapped GiB is
# reused for their activations. The warning must name train_step at the marked line. Run by
# tests/unit/test_torch_configs.c with FAKE_CUDART set to build/fake/libcudart.so.13.
import ctypes, os, sys, time
rt = ctypes.CDLL(os.environ["FAKE_CUDART"], mode=ctypes.RTLD_GLOBAL)
c10 = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
c10.mock_expandable_map.restype = ctypes.c_ulonglong
c10.mock_expandable_map.argtypes = [ctypes.c_ulonglong]
c10.mock_event.argtypes = [ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong]
sys.stdout.reconfigure(line_buffering=True)
ALLOC, FREE_REQUESTED, FREE_COMPLETED = 0, 1, 2
MiB, RANGE = 1 << 20, 20 << 20
count = ctypes.c_int()
rt.cudaGetDeviceCount(ctypes.byref(count))  # PyTorch's CUDA start: no allocation
c10.mock_init()
base = c10.mock_expandable_map(RANGE)
end, top = base + RANGE, base
while end - base < 1024 * MiB:  # the cached segment the steps reuse
    if not c10.mock_expandable_map(RANGE):
        sys.exit("cannot map the first GiB")
    end += RANGE


def room(n):
    """The address of n bytes at the top, ranges mapped as needed; 0 when the device is full."""
    global top, end
    while top + n > end:
        if not c10.mock_expandable_map(RANGE):
            return 0
        end += RANGE
    p, top = top, top + n
    return p


def tensor(n):
    p = room(n)
    if p:
        c10.mock_event(ALLOC, p, n)
    return p


def release(p, n):
    global top
    c10.mock_event(FREE_REQUESTED, p, n)
    c10.mock_event(FREE_COMPLETED, p, n)
    if p + n == top:
        top = p


kept = []


def train_step():
    p = room(16 * MiB)
    if not p:
        return False
    c10.mock_event(ALLOC, p, 16 * MiB)  # LEAK_LINE
    kept.append(p)
    acts = [tensor(48 * MiB) for _ in range(3)]
    time.sleep(0.025)
    for a in reversed(acts):
        if a:
            release(a, 48 * MiB)
    return all(acts)


for step in range(1, 400):
    print("step", step, "mapped", (end - base) // MiB)
    if not train_step():
        print("oom at step", step)
        sys.exit(0)
sys.exit(1)
