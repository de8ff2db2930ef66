# CuPy 14 loads no libcudart (driver API only): under CUDA_INJECTION64_PATH=libgmshim.so the
# log must show its allocations as observed. Keeps three 64 MiB arrays alive to the end; its
# memory pool takes each from the driver once.
import cupy as cp

keep = [cp.full((16, 1024, 1024), i, dtype=cp.float32) for i in range(3)]
cp.cuda.Device().synchronize()
print(f"cupy_arrays=3 bytes_each={keep[0].nbytes}")
