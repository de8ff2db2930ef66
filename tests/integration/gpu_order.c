/* GMSHIM_GPU_ORDER: a block freed while a "kernel" still writes it is handed out again at once,
 * and the new owner's work waits for that kernel on the GPU, on whichever stream it runs.
 *   gpu_order OLD:NEW EXPECT [DEVICES]
 * OLD is the stream of the late kernel (nb: non-blocking, blocking, legacy); NEW the stream of
 * the new owner's memset (nb2: another non-blocking stream, blocking, legacy, perthread, later: a
 * non-blocking stream created after the allocation). EXPECT: "ordered" (no allocation waits for
 * the kernel), "waited" (each waits, as without GMSHIM_GPU_ORDER), or "switched" (the first
 * trial ordered, the others waited). DEVICES (with FAKECUDA_DEVICES=2): "dev0" or "dev1" everything on
 * that device, as a torchrun rank that sees every GPU; "both" device 1 made current once before
 * the program settles on device 0; "peer" everything on device 0 but the new owner's memset,
 * which device 1's stream does right after the reallocation (the first time device 1 is used).
 * Streams made through the driver, below the runtime's hooks, as NEW: drv (cuStreamCreate by
 * symbol), drvdlsym (cuStreamCreateWithPriority from dlsym on the runtime's handle, as a static
 * runtime finds its driver), drvproc (cuGetProcAddress from dlsym, then cuStreamCreate from it),
 * drvproc2 (cuGetProcAddress_v2, asked for "cuGetProcAddress" as CUDA 12.8 does, then
 * cuStreamCreate), green (a green context's stream), private (a stream of another context);
 * all non-blocking.
 * The new block must be the freed one in every trial, and never hold the kernel's late write. */
#include "itest.h"

#define SIZE (4u << 20) /* large: a pending block of its size is preferred over a free remainder */
#define TRIALS 6

static void late_write(void *p)
{
    memset(p, 0xAA, SIZE);
}

typedef int (*create_fn)(void **, unsigned);
typedef int (*proc_fn)(const char *, void **, int, unsigned long long);
typedef int (*proc2_fn)(const char *, void **, int, unsigned long long, int *);
int cuStreamCreate(void **ph, unsigned flags);
int cuGreenCtxStreamCreate(void **ph, void *green, unsigned flags, int prio);

/* The runtime's own handle: in the fake, libcudart is also the driver. */
static void *driver_handle(void)
{
    void *h = dlopen("libcudart.so.13", RTLD_LAZY | RTLD_NOLOAD);
    CHECK(h != NULL, "the runtime is not loaded: %s", dlerror());
    return h;
}

static cudaStream_t driver_stream(const char *kind)
{
    void *s = NULL;
    if (!strcmp(kind, "drv")) {
        CHECK(cuStreamCreate(&s, 1) == 0, "cuStreamCreate failed");
    } else if (!strcmp(kind, "drvdlsym")) {
        int (*create)(void **, unsigned, int) = (int (*)(void **, unsigned, int))dlsym(driver_handle(), "cuStreamCreateWithPriority");
        CHECK(create && create(&s, 1, 0) == 0, "cuStreamCreateWithPriority from dlsym failed");
    } else if (!strcmp(kind, "drvproc")) {
        proc_fn proc = (proc_fn)dlsym(driver_handle(), "cuGetProcAddress");
        create_fn create = NULL;
        CHECK(proc && proc("cuStreamCreate", (void **)&create, 12000, 0) == 0 && create, "cuGetProcAddress failed");
        CHECK(create(&s, 1) == 0, "cuStreamCreate from cuGetProcAddress failed");
    } else if (!strcmp(kind, "drvproc2")) {
        proc2_fn proc2 = (proc2_fn)dlsym(driver_handle(), "cuGetProcAddress_v2"), self = NULL;
        create_fn create = NULL;
        CHECK(proc2 && proc2("cuGetProcAddress", (void **)&self, 12080, 0, NULL) == 0 && self, "cuGetProcAddress_v2 failed");
        CHECK(self("cuStreamCreate", (void **)&create, 12080, 0, NULL) == 0 && create, "cuGetProcAddress (v2) failed");
        CHECK(create(&s, 1) == 0, "cuStreamCreate from cuGetProcAddress_v2 failed");
    } else if (!strcmp(kind, "green")) {
        CHECK(cuGreenCtxStreamCreate(&s, NULL, 1, 0) == 0, "cuGreenCtxStreamCreate failed");
    } else if (!strcmp(kind, "private")) {
        fakecuda_private_context(1);
        CHECK(cuStreamCreate(&s, 1) == 0, "cuStreamCreate failed");
        fakecuda_private_context(0);
    } else {
        return NULL;
    }
    return (cudaStream_t)s;
}

static cudaStream_t stream_of(const char *kind)
{
    cudaStream_t s = driver_stream(kind);
    if (s)
        return s;
    if (!strcmp(kind, "legacy"))
        return cudaStreamLegacy;
    if (!strcmp(kind, "perthread"))
        return cudaStreamPerThread;
    if (!strcmp(kind, "blocking"))
        CUDA_OK(cudaStreamCreate(&s));
    else if (!strcmp(kind, "nb") || !strcmp(kind, "nb2"))
        CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    else
        CHECK(0, "unknown stream kind '%s'", kind);
    return s;
}

int main(int argc, char **argv)
{
    CHECK(argc == 3 || argc == 4, "usage: gpu_order OLD:NEW ordered|waited|switched [dev0|dev1|both|peer]");
    char old_kind[32], new_kind[32];
    CHECK(sscanf(argv[1], "%31[^:]:%31s", old_kind, new_kind) == 2, "bad OLD:NEW '%s'", argv[1]);
    const char *expect = argv[2], *devices = argc == 4 ? argv[3] : "";
    int dev = !strcmp(devices, "dev1"), peer = !strcmp(devices, "peer");
    if (!strcmp(devices, "both"))
        CUDA_OK(cudaSetDevice(1));
    CUDA_OK(cudaSetDevice(dev));
    cudaStream_t olds = stream_of(old_kind);
    int later = !strcmp(new_kind, "later");
    cudaStream_t news = later || peer ? NULL : stream_of(new_kind);
    gmshim_stats_t before, after;
    gm_stats(dev, &before);
    int reused = 0, corrupted = 0;
    unsigned long long first_waits = 0; /* in the first trial's reallocation */
    for (int t = 0; t < TRIALS; t++) {
        void *old, *fresh;
        CUDA_OK(cudaMalloc(&old, SIZE));
        CUDA_OK(cudaMemset(old, 0, SIZE));
        CUDA_OK(fakecuda_launch(olds, late_write, old, 50000)); /* writes 50 ms from now */
        CUDA_OK(cudaFree(old));
        CUDA_OK(cudaMalloc(&fresh, SIZE));
        reused += fresh == old;
        if (t == 0) {
            gmshim_stats_t mid;
            gm_stats(dev, &mid);
            first_waits = mid.fence_waits - before.fence_waits;
        }
        if (peer) {
            CUDA_OK(cudaSetDevice(1));
            if (!news)
                CUDA_OK(cudaStreamCreateWithFlags(&news, cudaStreamNonBlocking));
        } else if (later) {
            CUDA_OK(cudaStreamCreateWithFlags(&news, cudaStreamNonBlocking));
        }
        CUDA_OK(cudaMemsetAsync(fresh, 0x55, SIZE, news));
        if (peer)
            CUDA_OK(cudaSetDevice(0));
        fakecuda_drain();
        const unsigned char *c = fresh;
        for (size_t i = 0; i < SIZE; i++)
            if (c[i] != 0x55) {
                corrupted++;
                break;
            }
        CUDA_OK(cudaFree(fresh));
        if (later)
            CUDA_OK(cudaStreamDestroy(news));
    }
    gm_stats(dev, &after);
    unsigned long long waits = after.fence_waits - before.fence_waits;
    printf("%s %s: %d trials, %d reused the freed block, %d corrupted, %llu waits for a fence\n",
           argv[1], devices, TRIALS, reused, corrupted, waits);
    CHECK(corrupted == 0, "%d of %d trials read the late kernel's write", corrupted, TRIALS);
    CHECK(reused == TRIALS, "only %d of %d trials got the freed block back", reused, TRIALS);
    if (!strcmp(expect, "ordered"))
        CHECK(waits == 0, "%llu allocations waited for the kernel on the CPU", waits);
    else if (!strcmp(expect, "switched"))
        CHECK(first_waits == 0 && waits >= TRIALS - 1, "%llu waits in the first trial (none expected), %llu in all",
              first_waits, waits);
    else
        CHECK(waits >= TRIALS, "%llu waits for %d trials", waits, TRIALS);
    return 0;
}
