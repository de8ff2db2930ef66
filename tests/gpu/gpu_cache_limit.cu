// GMSHIM_CACHE_LIMIT on a real GPU: 32 blocks of 64 MiB are written by a kernel that runs for
// about 200 ms, then all freed while it still runs; the program then makes no CUDA call and
// watches gmshim's reserved bytes (gmshim_get_stats, no runtime call) until they are under the
// cap. Prints "cache_limit reserved_after_free R cap C settled_ms T kernel_ms K".
#include "gpu_common.h"
#include "../../shim/gmshim.h"

#include <dlfcn.h>
#include <string.h>
#include <unistd.h>

__global__ void spin_write(char *p, size_t n, long long cycles)
{
    long long t0 = clock64();
    while (clock64() - t0 < cycles)
        ;
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = 1;
}

int main(void)
{
    int (*get)(int, gmshim_stats_t *) = (int (*)(int, gmshim_stats_t *))dlsym(RTLD_DEFAULT, "gmshim_get_stats");
    if (!get) {
        printf("cache_limit not under gmshim\n");
        return 1;
    }
    const char *cap_s = getenv("GMSHIM_CACHE_LIMIT");
    size_t cap = cap_s ? strtoull(cap_s, NULL, 10) : 0;
    enum { N = 32 };
    const size_t sz = (size_t)64 << 20;
    char *p[N];
    int rate_khz = 0;
    CK(cudaDeviceGetAttribute(&rate_khz, cudaDevAttrClockRate, 0));
    long long cycles = (long long)rate_khz * 200; // ~200 ms
    for (int i = 0; i < N; i++)
        CK(cudaMalloc(&p[i], sz));
    double t0 = now_s();
    for (int i = 0; i < N; i++)
        spin_write<<<64, 256>>>(p[i], sz, i == N - 1 ? cycles : 0);
    for (int i = 0; i < N; i++)
        CK(cudaFree(p[i]));
    gmshim_stats_t st;
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    get(0, &st);
    unsigned long long after_free = st.reserved.current;
    double settled = -1;
    while (now_s() - t0 < 5.0) {
        memset(&st, 0, sizeof st);
        st.size = sizeof st;
        get(0, &st);
        if (st.reserved.current <= cap) {
            settled = now_s() - t0;
            break;
        }
        usleep(1000);
    }
    printf("cache_limit reserved_after_free %llu cap %zu settled_ms %.1f kernel_ms %.1f reserved_now %llu\n",
           after_free, cap, settled * 1e3, cycles / (double)rate_khz, (unsigned long long)st.reserved.current);
    CK(cudaDeviceSynchronize());
    return settled >= 0 ? 0 : 3;
}
