/* P1, the hot path: cudaMalloc+cudaFree pairs of one size, timed in batches. Run it plain (the
 * driver), under gmshim (the pool), or with --async (cudaMallocAsync+cudaFreeAsync on a stream,
 * the default pool's release threshold at its maximum). Prints one JSON object per size: the
 * median ns per pair over repetitions, and the spread (min, max). Uses only the runtime API, so
 * it builds against the fake runtime (tests) and the real one (scripts/gpu-bench). */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#define CK(call)                                                                                  \
    do {                                                                                          \
        cudaError_t e_ = (call);                                                                  \
        if (e_ != cudaSuccess) {                                                                  \
            fprintf(stderr, "%s -> %d\n", #call, (int)e_);                                         \
            exit(2);                                                                              \
        }                                                                                         \
    } while (0)

int main(int argc, char **argv)
{
    int async = 0, reps = 7;
    const char *single = NULL; /* one runtime call or clock read timed alone */
    double batch_ms = 30;
    size_t sizes[32];
    int nsizes = 0;
    const char *label = "run";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--async"))
            async = 1;
        else if (!strcmp(argv[i], "--getdevice") || !strcmp(argv[i], "--clock") || !strcmp(argv[i], "--record") ||
                 !strcmp(argv[i], "--capture-mode") || !strcmp(argv[i], "--record-query") ||
                 !strcmp(argv[i], "--fence-like") || !strcmp(argv[i], "--record-query-previous") ||
                 !strcmp(argv[i], "--counter"))
            single = argv[i] + 2;
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--batch-ms") && i + 1 < argc)
            batch_ms = atof(argv[++i]);
        else if (!strcmp(argv[i], "--label") && i + 1 < argc)
            label = argv[++i];
        else if (nsizes < 32)
            sizes[nsizes++] = strtoull(argv[i], NULL, 0);
    }
    if (!nsizes) {
        size_t def[] = {512, 4096, 65536, 1 << 20, 2 << 20, 20 << 20, 256u << 20, 1u << 30};
        memcpy(sizes, def, sizeof def);
        nsizes = 8;
    }
    cudaStream_t s = 0;
    CK(cudaFree(NULL));
    if (async) {
        CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        cudaMemPool_t pool;
        CK(cudaDeviceGetDefaultMemPool(&pool, 0));
        uint64_t thr = UINT64_MAX;
        CK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &thr));
    }
    if (single) {
        /* What one cudaGetDevice costs (gmshim makes one per cudaMalloc when the process sees
         * several devices), one clock read (two per pair with the log on), one event recorded on
         * the legacy stream (a fence with no other stream known), one time-stamp counter read
         * (what stamps a log record on a hit), or the two capture-mode
         * exchanges around every runtime call gmshim makes on a slow path; then a fence as gmshim
         * makes it: record and query one event (default), or, under GPU order, the two exchanges
         * and a record on one of 16 events in turn, the newest queried every 16th time; or a record and
 * a query of the event recorded one call earlier (whether a query costs less once its event had
 * time to reach the GPU). */
        static const char *const names[][2] = {{"getdevice", "cudaGetDevice"},
                                                {"clock", "clock_gettime"},
                                                {"record", "cudaEventRecord(legacy)"},
                                                {"capture-mode", "2 x cudaThreadExchangeStreamCaptureMode"},
                                                {"record-query", "cudaEventRecord+cudaEventQuery"},
                                                {"fence-like", "GPU-order fence (exchanges, record, 1/16 query)"},
                                                {"record-query-previous", "cudaEventRecord+cudaEventQuery of the previous one"},
                                                {"counter", "rdtsc"}};
        int what = 0;
        while (strcmp(names[what][0], single))
            what++;
        double *ns = calloc((size_t)reps, sizeof *ns);
        int dev;
        struct timespec ts;
        cudaEvent_t ev, ring[16];
        CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
        for (int i = 0; i < 16; i++)
            CK(cudaEventCreateWithFlags(&ring[i], cudaEventDisableTiming));
        enum cudaStreamCaptureMode mode;
        int calls = what >= 2 && what != 3 && what != 7 ? 100000 : 1000000;
        volatile unsigned long long sink = 0;
        for (int r = 0; r < reps; r++) {
            double a = now_ns();
            for (int i = 0; i < calls; i++) {
                switch (what) {
                case 0: cudaGetDevice(&dev); break;
                case 1: clock_gettime(CLOCK_MONOTONIC, &ts); break;
                case 2: cudaEventRecord(ev, cudaStreamLegacy); break;
                case 4:
                    cudaEventRecord(ev, cudaStreamLegacy);
                    cudaEventQuery(ev);
                    break;
                case 5:
                    mode = cudaStreamCaptureModeRelaxed;
                    cudaThreadExchangeStreamCaptureMode(&mode);
                    cudaEventRecord(ring[i & 15], cudaStreamLegacy);
                    if ((i & 15) == 15)
                        cudaEventQuery(ring[15]);
                    cudaThreadExchangeStreamCaptureMode(&mode);
                    break;
                case 7: { /* the counter read that stamps a log record on a hit (x86-64) */
#if defined(__x86_64__)
                    unsigned lo, hi;
                    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
                    sink = (unsigned long long)hi << 32 | lo;
#endif
                    (void)sink;
                    break;
                }
                case 6: /* what querying costs when the event was recorded a call earlier */
                    cudaEventRecord(ring[i & 15], cudaStreamLegacy);
                    cudaEventQuery(ring[(i - 1) & 15]);
                    break;
                default:
                    mode = cudaStreamCaptureModeRelaxed;
                    cudaThreadExchangeStreamCaptureMode(&mode);
                    cudaThreadExchangeStreamCaptureMode(&mode);
                }
            }
            ns[r] = (now_ns() - a) / calls;
            if (what == 2 || what >= 4)
                CK(cudaDeviceSynchronize());
        }
        qsort(ns, (size_t)reps, sizeof *ns, cmp);
        printf("{\"bench\":\"p1\",\"label\":\"%s\",\"size\":0,\"median_ns\":%.1f,"
               "\"min_ns\":%.1f,\"max_ns\":%.1f}\n", names[what][1], ns[reps / 2], ns[0], ns[reps - 1]);
        return 0;
    }
    for (int z = 0; z < nsizes; z++) {
        size_t size = sizes[z];
        void *p;
        /* Warm-up, and an estimate of the pairs per batch; the first size's warm-up lasts 60 ms,
         * past the 50 ms over which gmshim calibrates its clock (GMSHIM_CLOCK). */
        double t0 = now_ns(), warm_ns = z == 0 && batch_ms * 1e6 / 3 < 60e6 ? 60e6 : batch_ms * 1e6 / 3;
        int warm = 0;
        do {
            if (async) {
                CK(cudaMallocAsync(&p, size, s));
                CK(cudaFreeAsync(p, s));
            } else {
                CK(cudaMalloc(&p, size));
                CK(cudaFree(p));
            }
            warm++;
        } while (now_ns() - t0 < warm_ns && warm < 100000000);
        double per = (now_ns() - t0) / warm;
        long n = (long)(batch_ms * 1e6 / (per > 1 ? per : 1));
        if (n < 5)
            n = 5;
        double *ns = calloc((size_t)reps, sizeof *ns);
        for (int r = 0; r < reps; r++) {
            double a = now_ns();
            for (long i = 0; i < n; i++) {
                if (async) {
                    CK(cudaMallocAsync(&p, size, s));
                    CK(cudaFreeAsync(p, s));
                } else {
                    CK(cudaMalloc(&p, size));
                    CK(cudaFree(p));
                }
            }
            ns[r] = (now_ns() - a) / n;
        }
        if (async)
            CK(cudaStreamSynchronize(s));
        qsort(ns, (size_t)reps, sizeof *ns, cmp);
        printf("{\"bench\":\"p1\",\"label\":\"%s\",\"size\":%zu,\"pairs_per_rep\":%ld,\"reps\":%d,"
               "\"median_ns\":%.1f,\"min_ns\":%.1f,\"max_ns\":%.1f}\n",
               label, size, n, reps, ns[reps / 2], ns[0], ns[reps - 1]);
        fflush(stdout);
        free(ns);
    }
    return 0;
}
