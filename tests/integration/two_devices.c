/* Pools are per device; a pointer freed on a thread whose current device is another one goes
 * back to its own device's pool; threads that switch devices between calls always get memory of
 * the device current at the call (gmshim learns it from the driver's current context). */
#include "itest.h"

#include <pthread.h>

static void *p1;

static void *free_from_device0(void *arg)
{
    (void)arg;
    CUDA_OK(cudaSetDevice(0));
    CUDA_OK(cudaFree(p1));
    return NULL;
}

static void *switching(void *arg)
{
    int me = (int)(uintptr_t)arg;
    for (int k = 0; k < 2000; k++) {
        int dev = (k + me) % 2;
        CUDA_OK(cudaSetDevice(dev));
        void *p;
        CUDA_OK(cudaMalloc(&p, 4096u * (size_t)(1 + me)));
        struct cudaPointerAttributes at;
        CUDA_OK(cudaPointerGetAttributes(&at, p));
        CHECK(at.device == dev, "thread %d, call %d: memory of device %d while %d was current", me,
              k, at.device, dev);
        CUDA_OK(cudaFree(p));
    }
    return NULL;
}

int main(void)
{
    /* FAKECUDA_DEVICES=2 */
    int n = 0;
    CUDA_OK(cudaGetDeviceCount(&n));
    CHECK(n == 2, "device count %d", n);
    void *p0;
    CUDA_OK(cudaSetDevice(0));
    CUDA_OK(cudaMalloc(&p0, 5 << 20));
    CUDA_OK(cudaSetDevice(1));
    CUDA_OK(cudaMalloc(&p1, 7 << 20));
    struct cudaPointerAttributes at;
    CUDA_OK(cudaPointerGetAttributes(&at, p1));
    CHECK(at.device == 1, "p1 is on device %d", at.device);
    pthread_t th;
    pthread_create(&th, NULL, free_from_device0, NULL);
    pthread_join(th, NULL);
    gmshim_stats_t s0, s1;
    gm_stats(0, &s0);
    gm_stats(1, &s1);
    CHECK(s0.frees == 0 && s1.frees == 1, "frees: device 0 %llu, device 1 %llu", s0.frees, s1.frees);
    CHECK(s0.allocated.current == 5 << 20, "device 0 allocated %llu", s0.allocated.current);
    CHECK(s1.allocated.current == 0, "device 1 allocated %llu", s1.allocated.current);
    /* Device 1 reuses its own freed block. */
    CUDA_OK(cudaSetDevice(1));
    struct fakecuda_stats f0 = fake_stats(1);
    void *q;
    CUDA_OK(cudaMalloc(&q, 7 << 20));
    struct fakecuda_stats f1 = fake_stats(1);
    CHECK(f1.mallocs == f0.mallocs, "device 1 went to the driver again");
    CUDA_OK(cudaPointerGetAttributes(&at, q));
    CHECK(at.device == 1, "q is on device %d", at.device);
    CUDA_OK(cudaFree(q));
    CUDA_OK(cudaSetDevice(0));
    CUDA_OK(cudaFree(p0));
    pthread_t sw[4];
    for (int t = 0; t < 4; t++)
        pthread_create(&sw[t], NULL, switching, (void *)(uintptr_t)t);
    for (int t = 0; t < 4; t++)
        pthread_join(sw[t], NULL);
    printf("ok\n");
    return 0;
}
