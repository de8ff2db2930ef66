/* What a GPU-order fence costs the GPU, without gmshim: the program's stream (the legacy one)
 * runs back-to-back kernels of a few microseconds, and every few kernels a fence is enqueued the
 * way gmshim orders one over N non-blocking streams kept busy by the previous fence's waits:
 *   direct  - an event on each stream, the legacy stream waits for each (N waits on it);
 *   hub     - an event on each stream, a stream of its own waits for them and records one event,
 *             the legacy stream waits for that one;
 * then each stream waits for an event on the legacy stream (both variants). Prints one JSON line
 * per variant: the GPU time of the run (legacy events) and the extra over no fences, per fence.
 *
 *   gpu_waits [streams=32] [kernel_us=20] [kernels_per_fence=4] [fences=500]
 */
#include "gpu_common.h"

#include <stdint.h>
#include <string.h>

__global__ void spin(long long ns)
{
    long long t0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    for (;;) {
        long long t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        if (t - t0 >= ns)
            break;
    }
}

enum variant { NONE, DIRECT, HUB };

static void sorted5(const double *in, double *out)
{
    memcpy(out, in, 5 * sizeof *out);
    for (int i = 0; i < 5; i++)
        for (int j = i + 1; j < 5; j++)
            if (out[j] < out[i]) {
                double t = out[i];
                out[i] = out[j];
                out[j] = t;
            }
}

static double run(enum variant v, int nstreams, cudaStream_t *s, cudaStream_t hub, cudaEvent_t *ev, int kernel_us,
                  int per_fence, int fences)
{
    cudaEvent_t t0, t1, legacy_ev, hub_ev;
    CK(cudaEventCreate(&t0));
    CK(cudaEventCreate(&t1));
    CK(cudaEventCreateWithFlags(&legacy_ev, cudaEventDisableTiming));
    CK(cudaEventCreateWithFlags(&hub_ev, cudaEventDisableTiming));
    CK(cudaDeviceSynchronize());
    CK(cudaEventRecord(t0, cudaStreamLegacy));
    for (int f = 0; f < fences; f++) {
        for (int k = 0; k < per_fence; k++)
            spin<<<1, 1, 0, cudaStreamLegacy>>>(kernel_us * 1000LL);
        if (v == NONE)
            continue;
        /* the fence: an event on each stream (busy with the last fence's wait) and on legacy */
        for (int i = 0; i < nstreams; i++)
            CK(cudaEventRecord(ev[i], s[i]));
        cudaStream_t waiter = v == HUB ? hub : cudaStreamLegacy;
        for (int i = 0; i < nstreams; i++)
            CK(cudaStreamWaitEvent(waiter, ev[i], 0));
        if (v == HUB) {
            CK(cudaEventRecord(hub_ev, hub));
            CK(cudaStreamWaitEvent(cudaStreamLegacy, hub_ev, 0));
        }
        /* ordered: every stream waits for the legacy stream */
        CK(cudaEventRecord(legacy_ev, cudaStreamLegacy));
        for (int i = 0; i < nstreams; i++)
            CK(cudaStreamWaitEvent(s[i], legacy_ev, 0));
    }
    CK(cudaEventRecord(t1, cudaStreamLegacy));
    CK(cudaEventSynchronize(t1));
    CK(cudaDeviceSynchronize());
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, t0, t1));
    CK(cudaEventDestroy(t0));
    CK(cudaEventDestroy(t1));
    CK(cudaEventDestroy(legacy_ev));
    CK(cudaEventDestroy(hub_ev));
    return ms;
}

int main(int argc, char **argv)
{
    int nstreams = argc > 1 ? atoi(argv[1]) : 32, kernel_us = argc > 2 ? atoi(argv[2]) : 20;
    int per_fence = argc > 3 ? atoi(argv[3]) : 4, fences = argc > 4 ? atoi(argv[4]) : 500;
    if (nstreams < 1 || nstreams > 256 || kernel_us < 1 || per_fence < 1 || fences < 1) {
        fprintf(stderr, "usage: gpu_waits [streams 1-256] [kernel_us] [kernels_per_fence] [fences]\n");
        return 2;
    }
    cudaStream_t s[256], hub;
    cudaEvent_t ev[256];
    for (int i = 0; i < nstreams; i++) {
        CK(cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking));
        CK(cudaEventCreateWithFlags(&ev[i], cudaEventDisableTiming));
    }
    CK(cudaStreamCreateWithFlags(&hub, cudaStreamNonBlocking));
    run(NONE, nstreams, s, hub, ev, kernel_us, per_fence, 50); /* warm-up */
    const char *names[] = {"none", "direct", "hub"};
    double ms[3][5];
    for (int r = 0; r < 5; r++) /* alternating rounds */
        for (int v = NONE; v <= HUB; v++)
            ms[v][r] = run((enum variant)v, nstreams, s, hub, ev, kernel_us, per_fence, fences);
    double base[5];
    sorted5(ms[NONE], base);
    for (int v = NONE; v <= HUB; v++) {
        double m[5];
        sorted5(ms[v], m);
        printf("{\"bench\":\"gpu_waits\",\"variant\":\"%s\",\"streams\":%d,\"kernel_us\":%d,"
               "\"kernels_per_fence\":%d,\"fences\":%d,\"gpu_ms\":%.3f,\"min_ms\":%.3f,\"max_ms\":%.3f,"
               "\"extra_us_per_fence\":%.3f}\n",
               names[v], nstreams, kernel_us, per_fence, fences, m[2], m[0], m[4], (m[2] - base[2]) * 1000.0 / fences);
    }
    return 0;
}
