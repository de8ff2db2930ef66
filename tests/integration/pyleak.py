# Python frames in call sites: allocations made from Python (through ctypes and gmshim's hook,
# against the fake runtime) must be reported at this file's lines. Run by
# tests/unit/test_integration.c with FAKE_CUDART set to build/fake/libcudart.so.13.
import ctypes, os
ctypes.CDLL(os.environ["FAKE_CUDART"], mode=ctypes.RTLD_GLOBAL)
rt = ctypes.CDLL(None)  # gmshim's cudaMalloc, first in the global scope
kept = []


def make_tensor(n):
    p = ctypes.c_void_p()
    assert rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(n)) == 0   # MAKE_TENSOR_LINE
    return p


class Model:
    def forward(self):
        return make_tensor(1 << 20)                                    # FORWARD_LINE


for i in range(4):
    kept.append(Model().forward())                                     # LEAK_LINE
