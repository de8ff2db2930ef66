// Which runtime calls, made during a global-mode capture on a non-blocking stream, leave the
// capture valid? One capture per probe; prints "probe=<name> call=<rc> end=<rc>".
#include "gpu_common.h"
#include <pthread.h>
#include <string.h>

__global__ void k(float *p) { if (p) p[threadIdx.x] += 1.f; }

static cudaStream_t s;
static cudaEvent_t ev_before;
static float *buf;

static cudaError_t relaxed(cudaError_t (*fn)(void))
{
    enum cudaStreamCaptureMode m = cudaStreamCaptureModeRelaxed;
    cudaThreadExchangeStreamCaptureMode(&m);
    cudaError_t r = fn();
    cudaThreadExchangeStreamCaptureMode(&m);
    return r;
}

static cudaError_t p_none(void) { return cudaSuccess; }
static cudaError_t p_getdevice(void) { int d; return cudaGetDevice(&d); }
static cudaError_t p_streamgetdevice(void) { int d; return cudaStreamGetDevice(s, &d); }
static cudaError_t p_malloc(void) { void *p; return cudaMalloc(&p, 20 << 20); }
static cudaError_t p_malloc_free(void) { void *p; cudaError_t r = cudaMalloc(&p, 20 << 20); return r ? r : cudaFree(p); }
static cudaError_t p_eventquery(void) { return cudaEventQuery(ev_before); }
static cudaError_t p_peek(void) { return cudaPeekAtLastError(); }
static cudaError_t p_getlast(void) { return cudaGetLastError(); }
static cudaError_t p_meminfo(void) { size_t f, t; return cudaMemGetInfo(&f, &t); }
static cudaError_t p_iscapturing(void) { enum cudaStreamCaptureStatus st; return cudaStreamIsCapturing(s, &st); }
static cudaError_t p_setdevice(void) { return cudaSetDevice(0); }
static cudaError_t p_exchange_only(void) { enum cudaStreamCaptureMode m = cudaStreamCaptureModeRelaxed; cudaThreadExchangeStreamCaptureMode(&m); return cudaThreadExchangeStreamCaptureMode(&m); }
static cudaError_t p_relaxed_malloc(void) { return relaxed(p_malloc); }
static cudaError_t p_relaxed_malloc_free(void) { return relaxed(p_malloc_free); }
static cudaError_t p_relaxed_eventquery(void) { return relaxed(p_eventquery); }
static cudaError_t p_relaxed_streamgetdevice(void) { return relaxed(p_streamgetdevice); }
static cudaError_t p_relaxed_getdevice_malloc(void) { int d; cudaGetDevice(&d); return relaxed(p_malloc); }

struct thread_arg { cudaError_t (*fn)(void); cudaError_t rc; };
static void *thread_main(void *a) { struct thread_arg *t = (struct thread_arg *)a; t->rc = t->fn(); return NULL; }
static cudaError_t in_thread(cudaError_t (*fn)(void)) { struct thread_arg t = {fn, cudaErrorUnknown}; pthread_t th; pthread_create(&th, NULL, thread_main, &t); pthread_join(th, NULL); return t.rc; }
static cudaError_t p_thread_getdevice(void) { return in_thread(p_getdevice); }
static cudaError_t p_thread_relaxed_malloc(void) { return in_thread(p_relaxed_malloc); }
static cudaError_t p_thread_relaxed_getdevice_malloc(void) { return in_thread(p_relaxed_getdevice_malloc); }
static cudaError_t p_thread_none(void) { return in_thread(p_none); }

int main(int argc, char **argv)
{
    struct { const char *name; cudaError_t (*fn)(void); } probes[] = {
        {"none", p_none}, {"getdevice", p_getdevice}, {"setdevice", p_setdevice},
        {"streamgetdevice", p_streamgetdevice}, {"relaxed_streamgetdevice", p_relaxed_streamgetdevice}, {"peek", p_peek}, {"getlast", p_getlast},
        {"meminfo", p_meminfo}, {"iscapturing", p_iscapturing}, {"exchange_only", p_exchange_only},
        {"relaxed_malloc", p_relaxed_malloc}, {"relaxed_malloc_free", p_relaxed_malloc_free},
        {"relaxed_eventquery", p_relaxed_eventquery}, {"thread_none", p_thread_none},
        {"thread_getdevice", p_thread_getdevice}, {"thread_relaxed_malloc", p_thread_relaxed_malloc},
        {"thread_relaxed_getdevice_malloc", p_thread_relaxed_getdevice_malloc},
        {"malloc", p_malloc},
    };
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CK(cudaEventCreateWithFlags(&ev_before, cudaEventDisableTiming));
    CK(cudaMalloc(&buf, 4096));
    for (size_t i = 0; i < sizeof probes / sizeof *probes; i++) {
        if (argc > 1 && !strstr(argv[1], probes[i].name))
            continue;
        CK(cudaEventRecord(ev_before, cudaStreamLegacy));
        CK(cudaDeviceSynchronize());
        cudaError_t b = cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
        k<<<1, 32, 0, s>>>(buf);
        cudaError_t rc = probes[i].fn();
        k<<<1, 32, 0, s>>>(buf);
        cudaGraph_t g = NULL;
        cudaError_t end = cudaStreamEndCapture(s, &g);
        if (g)
            cudaGraphDestroy(g);
        cudaGetLastError();
        printf("probe=%s begin=%d call=%d end=%d\n", probes[i].name, b, rc, end);
        fflush(stdout);
        cudaDeviceSynchronize();
        cudaGetLastError();
    }
    return 0;
}
