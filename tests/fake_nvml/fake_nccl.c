/* libfakenccl.so: a library with its own runtime, as NCCL and cuBLAS are: it takes device memory
 * from the driver functions cuGetProcAddress hands it, never from the runtime's cudaMalloc. The
 * driver here is the fake runtime (tests/fake/fake_driver.c), found as a static runtime finds
 * libcuda: by dlsym on its handle. Test code only. */
#include <dlfcn.h>
#include <stddef.h>

typedef int (*proc2_fn)(const char *, void **, int, unsigned long long, int *);
typedef int (*alloc_fn)(unsigned long long *, size_t);
typedef int (*free_fn)(unsigned long long);

void *fakenccl_buffers(size_t bytes, int *result);
int fakenccl_release(void *p);

static void *driver_function(const char *name)
{
    void *h = dlopen("libcudart.so.13", RTLD_NOW | RTLD_NOLOAD);
    proc2_fn proc = h ? (proc2_fn)dlsym(h, "cuGetProcAddress_v2") : NULL;
    if (h)
        dlclose(h);
    void *fn = NULL;
    int status = 0;
    return proc && proc(name, &fn, 13000, 0, &status) == 0 ? fn : NULL;
}

void *fakenccl_buffers(size_t bytes, int *result)
{
    alloc_fn fn = (alloc_fn)driver_function("cuMemAlloc_v2");
    unsigned long long p = 0;
    *result = fn ? fn(&p, bytes) : 500;
    return *result == 0 ? (void *)(size_t)p : NULL;
}

int fakenccl_release(void *p)
{
    free_fn fn = (free_fn)driver_function("cuMemFree_v2");
    return fn ? fn((unsigned long long)(size_t)p) : 500;
}
