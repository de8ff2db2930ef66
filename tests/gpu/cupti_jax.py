# JAX/XLA allocates with the driver API (cuMemAlloc_v2), which no cudaMalloc hook sees: under
# CUDA_INJECTION64_PATH=libgmshim.so the log must show its allocations as observed. Keeps three
# 64 MiB arrays alive to the end. XLA_PYTHON_CLIENT_ALLOCATOR=platform (set by cupti-check.sh)
# makes each array its own driver allocation; with XLA's default the log shows its one big
# preallocated region instead.
import jax
import jax.numpy as jnp

keep = [jnp.full((16, 1024, 1024), float(i), dtype=jnp.float32) for i in range(3)]
for k in keep:
    k.block_until_ready()
print(f"jax_arrays=3 bytes_each={keep[0].nbytes} backend={jax.default_backend()}")
