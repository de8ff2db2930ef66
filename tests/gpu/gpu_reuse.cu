// Reuse ordering with real kernels on two non-blocking streams: a long kernel on stream A sums
// a buffer; the host frees the buffer, allocates the same size and a kernel on stream C
// overwrites the new buffer at once. The sum must be intact (the real cudaFree synchronizes;
// gmshim must keep that guarantee without blocking in cudaFree).
//   gpu_reuse [TRIALS [NEW [DEV]]]  NEW: the new owner's stream: nb (default: another
//   non-blocking stream), blocking, legacy, perthread, later (non-blocking, created after the
//   allocation), peer (a non-blocking stream of device 1, made current for the first time right
//   after the first reallocation, copying a device-1 buffer over the new block). DEV: the device
//   the program uses (default 0; with both GPUs visible, 1 is a torchrun rank's view). Streams
//   made below the shared runtime's hooks (all non-blocking): drv (cuStreamCreate, linked),
//   drventry (cuStreamCreate from cudaGetDriverEntryPointByVersion), drvdlsym (cuGetProcAddress_v2
//   from dlsym on libcuda, then cuStreamCreate from it), static (a library with its own static
//   runtime creates it, as NCCL does).
// alloc_us is the mean time of the reallocation: under GMSHIM_GPU_ORDER=1 it must not include
// the reader kernel (the ordering happens on the GPU).
#include "gpu_common.h"
#include <cuda.h>
#include <dlfcn.h>
#include <string.h>

extern "C" int static_runtime_stream(cudaStream_t *s);

typedef CUresult (*create_fn)(CUstream *, unsigned);
typedef CUresult (*proc2_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

static int driver_stream(const char *kind, cudaStream_t *c)
{
    CUstream s = NULL;
    if (!strcmp(kind, "drv")) {
        if (cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS)
            return -1;
    } else if (!strcmp(kind, "drventry")) {
        create_fn create = NULL;
        enum cudaDriverEntryPointQueryResult q;
        CK(cudaGetDriverEntryPointByVersion("cuStreamCreate", (void **)&create, 12000, cudaEnableDefault, &q));
        if (!create || create(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS)
            return -1;
    } else if (!strcmp(kind, "drvdlsym")) {
        void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
        proc2_fn proc = h ? (proc2_fn)dlsym(h, "cuGetProcAddress_v2") : NULL;
        create_fn create = NULL;
        if (!proc || proc("cuStreamCreate", (void **)&create, 12000, CU_GET_PROC_ADDRESS_DEFAULT, NULL) != CUDA_SUCCESS ||
            !create || create(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS)
            return -1;
    } else if (!strcmp(kind, "static")) {
        return static_runtime_stream(c);
    } else {
        return 1;
    }
    *c = (cudaStream_t)s;
    return 0;
}

__global__ void reader(const unsigned *buf, size_t n, int reps, unsigned long long *out)
{
    unsigned long long s = 0;
    for (int r = 0; r < reps; r++)
        for (size_t i = threadIdx.x; i < n; i += blockDim.x)
            s += ((volatile const unsigned *)buf)[i];
    atomicAdd(out, s);
}

__global__ void writer(unsigned *buf, size_t n, unsigned v)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        buf[i] = v;
}

int main(int argc, char **argv)
{
    int trials = argc > 1 ? atoi(argv[1]) : 20;
    const char *kind = argc > 2 ? argv[2] : "nb";
    int dev = argc > 3 ? atoi(argv[3]) : 0;
    int later = !strcmp(kind, "later"), peer = !strcmp(kind, "peer");
    CK(cudaSetDevice(dev));
    const size_t bytes = 16u << 20, n = bytes / 4;
    const int reps = 20;
    cudaStream_t a, c;
    CK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    if (!strcmp(kind, "nb"))
        CK(cudaStreamCreateWithFlags(&c, cudaStreamNonBlocking));
    else if (!strcmp(kind, "blocking"))
        CK(cudaStreamCreate(&c));
    else if (!strcmp(kind, "legacy"))
        c = cudaStreamLegacy;
    else if (!strcmp(kind, "perthread"))
        c = cudaStreamPerThread;
    else if (!later && !peer && driver_stream(kind, &c) != 0) {
        fprintf(stderr, "unknown stream kind %s\n", kind);
        return 2;
    }
    unsigned *src = NULL; /* peer: on device 1, all 7s */
    unsigned long long *sum;
    CK(cudaMalloc(&sum, sizeof *sum));
    int reused = 0, corrupted = 0;
    double t_free = 0, t_alloc = 0;
    for (int t = 0; t < trials; t++) {
        unsigned *buf;
        CK(cudaMalloc(&buf, bytes));
        writer<<<256, 256, 0, a>>>(buf, n, 1u);
        CK(cudaMemsetAsync(sum, 0, sizeof *sum, a));
        CK(cudaStreamSynchronize(a));
        reader<<<1, 1024, 0, a>>>(buf, n, reps, sum);
        double t0 = now_s();
        CK(cudaFree(buf));
        t_free += now_s() - t0;
        unsigned *fresh;
        t0 = now_s();
        CK(cudaMalloc(&fresh, bytes));
        t_alloc += now_s() - t0;
        reused += fresh == buf;
        if (later)
            CK(cudaStreamCreateWithFlags(&c, cudaStreamNonBlocking));
        if (peer) {
            CK(cudaSetDevice(1));
            if (!src) {
                CK(cudaStreamCreateWithFlags(&c, cudaStreamNonBlocking));
                CK(cudaMalloc(&src, bytes));
                writer<<<256, 256, 0, c>>>(src, n, 7u);
                CK(cudaStreamSynchronize(c));
            }
            CK(cudaMemcpyPeerAsync(fresh, dev, src, 1, bytes, c));
            CK(cudaStreamSynchronize(c));
            CK(cudaSetDevice(dev));
        } else {
            writer<<<256, 256, 0, c>>>(fresh, n, 7u);
        }
        CK(cudaDeviceSynchronize());
        unsigned long long got;
        CK(cudaMemcpy(&got, sum, sizeof got, cudaMemcpyDeviceToHost));
        corrupted += got != (unsigned long long)n * reps;
        CK(cudaFree(fresh));
        if (later)
            CK(cudaStreamDestroy(c));
    }
    printf("reuse_trials=%d stream=%s reused=%d corrupted=%d mean_free_us=%.1f mean_alloc_us=%.1f\n", trials,
           kind, reused, corrupted, t_free / trials * 1e6, t_alloc / trials * 1e6);
    return corrupted ? 1 : 0;
}
