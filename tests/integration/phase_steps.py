"""Training-like steps, each in `with gmshim.phase("step")`, each keeping KEEP bytes and freeing a
temporary: run under the preload with the fake CUDA runtime (argv: the source tree's python/
folder, the fake libcudart, KEEP), then `gmshim leaks` must find the growth per step."""

import ctypes
import sys

sys.path.insert(0, sys.argv[1])
import gmshim  # noqa: E402

ctypes.CDLL(sys.argv[2], mode=ctypes.RTLD_GLOBAL)
proc = ctypes.CDLL(None)
keep = int(sys.argv[3])
kept = []
for step in range(8):
    with gmshim.phase("step"):
        tmp, out = ctypes.c_void_p(), ctypes.c_void_p()
        assert proc.cudaMalloc(ctypes.byref(tmp), ctypes.c_size_t(4 * keep)) == 0
        assert proc.cudaMalloc(ctypes.byref(out), ctypes.c_size_t(keep)) == 0
        kept.append(out)
        assert proc.cudaFree(tmp) == 0
print("phase_steps: ok")
