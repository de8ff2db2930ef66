/* PyTorch with expandable segments, played on the stand-in allocator of tests/fake_torch (built
 * with GM_MOCK_EXPANDABLE, loaded from argv[1] as a torch package's libc10_cuda.so): no cudaMalloc
 * of PyTorch's at all, memory mapped with the driver calls PyTorch takes through
 * cudaGetDriverEntryPointByVersion, one segment that grows by 20 MiB ranges, and the allocator's
 * trace events for each tensor. Modes (argv[2]):
 *   tensors   two ranges mapped, a tensor across their boundary, frees, the last range unmapped.
 *   leak F    a training loop (a mark per step) that keeps a 16 MiB tensor per step and frees an
 *             8 MiB one, until PyTorch's cap refuses a range: with F > 0 its memory fraction F of
 *             the device (set_per_process_memory_fraction), else the driver. Prints the step.
 *   warn-leak   for GMSHIM_WARN (run with FAKECUDA_MEM=2G): 64 MiB of cudaMalloc (the program's
 *             own, in gmshim's pool), 1 GiB mapped and freed (a cached
 *             segment PyTorch reuses), then steps without marks of 25 ms that keep 16 MiB
 *             (warn_kept_tensor, exported: the shim names it) and free 144 MiB of activations,
 *             until the OOM; "step N mapped M" at each step's start, "oom at step N" at the end.
 *   warn-steady, warn-noisy   the same for 60 steps without the kept tensor (noisy: activations
 *             of random sizes); "done 60 steps". */
#include "itest.h"

#define MiB (1ull << 20)
#define RANGE (20 * MiB)

enum { ALLOC, FREE_REQUESTED, FREE_COMPLETED, SEGMENT_ALLOC, SEGMENT_FREE, SEGMENT_MAP, SEGMENT_UNMAP, SNAPSHOT, OOM };

static void (*event)(int, long long, long long);
static unsigned long long (*map_range)(unsigned long long);
static int (*unmap_last)(void);
static unsigned long long base, top, end; /* the segment, its next free byte, its mapped end */

/* A tensor at the top of the segment, mapping ranges as it needs them: 0 when the cap (the fraction
 * of the device, or the driver) refuses, after PyTorch's OOM event. */
/* Inlined: the innermost frame of a tensor's site is the line that asks for it. */
static inline __attribute__((always_inline)) unsigned long long tensor(unsigned long long bytes,
                                                                       unsigned long long cap)
{
    while (top + bytes > end) {
        unsigned long long mapped = base ? end - base : 0;
        unsigned long long at = cap && mapped + RANGE > cap ? 0 : map_range(RANGE);
        if (!at) {
            size_t free_b = 0, total = 0;
            cudaMemGetInfo(&free_b, &total);
            event(OOM, (long long)free_b, (long long)bytes);
            return 0;
        }
        if (!base)
            base = top = at;
        end = at + RANGE;
    }
    unsigned long long p = top;
    top += bytes;
    event(ALLOC, (long long)p, (long long)bytes);
    return p;
}

static void release(unsigned long long p, unsigned long long bytes)
{
    event(FREE_REQUESTED, (long long)p, (long long)bytes);
    event(FREE_COMPLETED, (long long)p, (long long)bytes);
    if (p + bytes == top)
        top = p;
}

/* The lines that ask (a frame of their own each: no tail call). */
static __attribute__((noinline)) unsigned long long kept_activation(unsigned long long cap)
{
    unsigned long long p = tensor(16 * MiB, cap);
    __asm__ volatile("" ::: "memory");
    return p;
}

static __attribute__((noinline)) unsigned long long scratch_buffer(unsigned long long cap)
{
    unsigned long long p = tensor(8 * MiB, cap);
    __asm__ volatile("" ::: "memory");
    return p;
}

static int tensors(void)
{
    unsigned long long a = tensor(12 * MiB, 0), b = tensor(16 * MiB, 0); /* b crosses into the second range */
    CHECK(a && b && end - base == 2 * RANGE, "mapped %llu", end - base);
    release(b, 16 * MiB);
    CHECK(unmap_last() == 0, "the last range was not unmapped");
    end -= RANGE;
    release(a, 12 * MiB);
    printf("ok\n");
    return 0;
}

static int leak(double fraction)
{
    void (*set_fraction)(double) = (void (*)(double))dlsym(RTLD_DEFAULT, "mock_set_fraction");
    int (*mark)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "gmshim_mark");
    size_t free_b = 0, total = 0;
    CUDA_OK(cudaMemGetInfo(&free_b, &total));
    unsigned long long cap = 0;
    if (fraction > 0) {
        set_fraction(fraction);
        cap = (unsigned long long)(fraction * (double)total);
    }
    for (int step = 0; step < 100000; step++) {
        if (mark)
            mark("step");
        if (!kept_activation(cap)) {
            printf("oom at step %d\n", step);
            return 0;
        }
        unsigned long long s = scratch_buffer(cap);
        if (!s) {
            printf("oom at step %d\n", step);
            return 0;
        }
        release(s, 8 * MiB);
    }
    printf("no oom\n");
    return 1;
}

unsigned long long warn_kept_tensor(void);

__attribute__((noinline)) unsigned long long warn_kept_tensor(void)
{
    unsigned long long p = tensor(16 * MiB, 0);
    __asm__ volatile("" ::: "memory");
    return p;
}

static int warn_steps(const char *mode)
{
    /* warn-leak-brief: steps of about 0.3 ms, thirty to one of the warning thread's readings. */
    int brief = !strcmp(mode, "warn-leak-brief");
    int leak = brief || !strcmp(mode, "warn-leak"), noisy = !strcmp(mode, "warn-noisy");
    /* Memory of the program's own first, which gmshim's pool serves: the warning's first readings
     * are of the pool, until the tensors come (as PyTorch's first segment comes before them). */
    void *own = NULL;
    CUDA_OK(cudaMalloc(&own, 64 * MiB));
    usleep(50000);
    unsigned long long big = tensor(1024 * MiB, 0);
    CHECK(big, "cannot map the first GiB");
    release(big, 1024 * MiB); /* mapped still: the cache the steps reuse */
    srand(42);
    for (int step = 1; leak || step <= 60; step++) {
        printf("step %d mapped %llu\n", step, (end - base) / MiB);
        if (leak && !warn_kept_tensor()) {
            printf("oom at step %d\n", step);
            return 0;
        }
        unsigned long long size[3] = {48 * MiB, 48 * MiB, 48 * MiB}, act[3];
        for (int i = 0; i < 3; i++) {
            if (noisy)
                size[i] = (unsigned long long)(1 + rand() % 64) * MiB;
            if (!(act[i] = tensor(size[i], 0))) {
                printf("oom at step %d\n", step);
                return !leak;
            }
        }
        usleep(brief ? 200 : 25000);
        for (int i = 2; i >= 0; i--)
            release(act[i], size[i]);
    }
    printf("done 60 steps\n");
    return 0;
}

int main(int argc, char **argv)
{
    CHECK(argc >= 3, "usage: torch_expandable LIBC10_CUDA tensors|leak [FRACTION]");
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
    CHECK(h, "dlopen %s: %s", argv[1], dlerror());
    void (*init)(void) = (void (*)(void))dlsym(h, "mock_init");
    event = (void (*)(int, long long, long long))dlsym(h, "mock_event");
    map_range = (unsigned long long (*)(unsigned long long))dlsym(h, "mock_expandable_map");
    unmap_last = (int (*)(void))dlsym(h, "mock_expandable_unmap_last");
    CHECK(init && event && map_range && unmap_last, "not the expandable stand-in");
    int dev_count = 0;
    CUDA_OK(cudaGetDeviceCount(&dev_count)); /* PyTorch's CUDA start: no allocation */
    init();
    if (!strcmp(argv[2], "tensors"))
        return tensors();
    if (!strncmp(argv[2], "warn-", 5)) {
        setvbuf(stdout, NULL, _IONBF, 0); /* in order with the shim's stderr on one pipe */
        return warn_steps(argv[2]);
    }
    if (!strcmp(argv[2], "leak"))
        return leak(argc > 3 ? atof(argv[3]) : 0);
    CHECK(0, "unknown mode %s", argv[2]);
    return 2;
}
