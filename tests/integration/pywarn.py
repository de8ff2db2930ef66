# GMSHIM_WARN from Python: marked steps (gmshim_mark through ctypes) whose activations are freed
# while train_step keeps 16 MiB a step, until the fake device (FAKECUDA_MEM=1G) is full. The
# warning must name train_step at the marked line. Run by tests/unit/test_warn.c with FAKE_CUDART
# set to build/fake/libcudart.so.13.
import ctypes, os, sys
ctypes.CDLL(os.environ["FAKE_CUDART"], mode=ctypes.RTLD_GLOBAL)
rt = ctypes.CDLL(None)  # gmshim's cudaMalloc and gmshim_mark, first in the global scope
sys.stdout.reconfigure(line_buffering=True)
kept = []
MiB = 1 << 20


def malloc(n):
    p = ctypes.c_void_p()
    return p if rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(n)) == 0 else None


def train_step():
    acts = [malloc(32 * MiB) for _ in range(2)]
    p = ctypes.c_void_p()
    ok = rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(16 * MiB)) == 0   # LEAK_LINE
    kept.append(p)
    for a in acts:
        if a:
            rt.cudaFree(a)
    return ok and all(acts)


for step in range(1, 200):
    print("step", step)
    rt.gmshim_mark(("step %d" % step).encode())
    if not train_step():
        print("oom at step", step)
        sys.exit(0)
sys.exit(1)
