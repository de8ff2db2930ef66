/* The card's ledger, every term driven (run with FAKECUDA_MEM=4G, FAKECUDA_CONTEXT=300M, the fake
 * NVML and libfakenccl.so on LD_LIBRARY_PATH): another process (a child of this one, holding 1.5
 * GiB through FAKECUDA_OTHERS) on device 0, 640 MiB taken through the driver by a library with
 * its own runtime, pooled buffers, a mark, then pooled buffers until the card is full: the
 * expected OOM. Modes: "oom" (default); "libheavy": the library takes 1.75 GiB instead, more than
 * the other process holds, so that it is the term that decides the OOM; "vmm" and "vmmheavy": the
 * same through the driver's virtual memory calls, each buffer one handle mapped at two addresses.
 * Exits 0. */
#include "itest.h"

#define MiB ((size_t)1 << 20)

typedef void *(*buffers_fn)(size_t, int *);
typedef int (*release_fn)(void *);

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "oom";
    pid_t holder = fork();
    CHECK(holder >= 0, "fork");
    if (holder == 0) {
        execlp("sleep", "sleep", "60", (char *)NULL);
        _exit(127);
    }
    char others[64];
    snprintf(others, sizeof others, "%d:1536M", (int)holder); /* read at the fake's first call */
    setenv("FAKECUDA_OTHERS", others, 1);
    usleep(20000); /* the child has exec'ed: its command line is sleep's */

    void *lib = dlopen("libfakenccl.so", RTLD_NOW);
    CHECK(lib, "libfakenccl.so: %s", dlerror());
    int vmm = !strncmp(mode, "vmm", 3), heavy = !strcmp(mode, "libheavy") || !strcmp(mode, "vmmheavy");
    buffers_fn buffers = (buffers_fn)dlsym(lib, vmm ? "fakenccl_vmm_buffers" : "fakenccl_buffers");
    release_fn release = (release_fn)dlsym(lib, vmm ? "fakenccl_vmm_release" : "fakenccl_release");
    CHECK(buffers && release, "fakenccl functions");

    static void *p[64];
    int n = 0, r;
    CUDA_OK(cudaMalloc(&p[n++], 256 * MiB));
    void *nccl = buffers(heavy ? 1792 * MiB : 640 * MiB, &r);
    CHECK(nccl && r == 0, "the library's buffers: %d", r);
    void *gone = buffers(8 * MiB, &r);
    CHECK(gone && release(gone) == 0, "a buffer given back");
    int (*mark)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "gmshim_mark");
    CHECK(mark && mark("step") == 0, "gmshim_mark");
    for (; n < 64; n++) {
        cudaError_t e = cudaMalloc(&p[n], 256 * MiB);
        if (e == cudaErrorMemoryAllocation) {
            printf("ledger_card: buffer %d did not fit: the expected OOM\n", n);
            kill(holder, SIGKILL);
            waitpid(holder, NULL, 0);
            return 0;
        }
        CHECK(e == cudaSuccess, "cudaMalloc %d", (int)e);
    }
    kill(holder, SIGKILL);
    waitpid(holder, NULL, 0);
    fprintf(stderr, "ledger_card: no OOM\n");
    return 1;
}
