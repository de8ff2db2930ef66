/* Threads that switch the current device between allocations, through the runtime
 * (cudaSetDevice) and through the driver (cuCtxSetCurrent with another device's primary
 * context): every cudaMalloc must return memory of the device current at the call. gmshim learns
 * that device from the driver's current context, so this is the check that its per-thread cache
 * follows both kinds of switch. Prints key=value pairs; exit 0 when nothing was misplaced.
 * Also times cudaGetDevice alone, since with several devices it is what gmshim avoids. */
#include "gpu_common.h"

#include <cuda.h>
#include <pthread.h>
#include <stdint.h>

#define THREADS 8
#define ROUNDS 4000

static int ndev;
static CUcontext primary[16];
static unsigned long long misplaced, checked;

static void *worker(void *arg)
{
    int me = (int)(uintptr_t)arg;
    unsigned long long bad = 0, n = 0;
    for (int k = 0; k < ROUNDS; k++) {
        int dev = (k / 3 + me) % ndev;
        if (k % 2)
            CK(cudaSetDevice(dev));
        else if (cuCtxSetCurrent(primary[dev]) != CUDA_SUCCESS)
            exit(3);
        void *p;
        CK(cudaMalloc(&p, 4096u * (unsigned)(1 + me % 4) + 512u * (unsigned)(k % 7)));
        struct cudaPointerAttributes at;
        CK(cudaPointerGetAttributes(&at, p));
        bad += at.device != dev;
        n++;
        CK(cudaFree(p));
    }
    __atomic_add_fetch(&misplaced, bad, __ATOMIC_RELAXED);
    __atomic_add_fetch(&checked, n, __ATOMIC_RELAXED);
    return NULL;
}

int main(void)
{
    CK(cudaGetDeviceCount(&ndev));
    if (ndev > 16)
        ndev = 16;
    for (int d = 0; d < ndev; d++) {
        CK(cudaSetDevice(d));
        CK(cudaFree(0));
        if (cuDevicePrimaryCtxRetain(&primary[d], d) != CUDA_SUCCESS)
            return 3;
    }
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++)
        pthread_create(&th[t], NULL, worker, (void *)(uintptr_t)t);
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    int dev;
    double t0 = now_s();
    for (int i = 0; i < 1000000; i++)
        cudaGetDevice(&dev);
    double get_ns = (now_s() - t0) * 1e3;
    printf("devices=%d checked=%llu misplaced=%llu cudaGetDevice_ns=%.1f\n", ndev, checked, misplaced,
           get_ns);
    return misplaced ? 1 : 0;
}
