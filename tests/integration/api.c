/* The application-side API, used the documented way: looked up with dlsym, so that the same
 * program runs with and without gmshim. argv[1] says which is expected ("with" / "without"). */
#include "itest.h"

#pragma weak gmshim_version

int main(int argc, char **argv)
{
    int expect = argc > 1 && !strcmp(argv[1], "with");
    int (*mark)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "gmshim_mark");
    unsigned long long (*empty)(void) = (unsigned long long (*)(void))dlsym(RTLD_DEFAULT, "gmshim_empty_cache");
    int (*get)(int, gmshim_stats_t *) = (int (*)(int, gmshim_stats_t *))dlsym(RTLD_DEFAULT, "gmshim_get_stats");
    int (*limit)(int, unsigned long long) = (int (*)(int, unsigned long long))dlsym(RTLD_DEFAULT, "gmshim_set_limit");
    int present = mark && empty && get && limit;
    CHECK(present == expect, "gmshim API %s", present ? "found" : "missing");
    CHECK((gmshim_version != NULL) == expect, "weak symbol gmshim_version %s", gmshim_version ? "resolved" : "NULL");
    void *p;
    CUDA_OK(cudaMalloc(&p, 8u << 20));
    CUDA_OK(cudaFree(p));
    if (!present) {
        printf("ok: running without gmshim\n");
        return 0;
    }
    CHECK(gmshim_version() == GMSHIM_API_VERSION, "version %d", gmshim_version());
    CHECK(mark("phase 1") == 0 || getenv("GMSHIM_LOG") == NULL, "gmshim_mark with a log");
    gmshim_stats_t st;
    memset(&st, 0, sizeof st);
    CHECK(get(0, &st) == -1, "get_stats must refuse a struct without its size");
    st.size = sizeof st;
    CHECK(get(0, &st) == 0, "get_stats");
    CHECK(st.allocs == 1 && st.frees == 1 && st.reserved.current >= 8u << 20,
          "allocs %llu frees %llu reserved %llu", st.allocs, st.frees, st.reserved.current);
    CHECK(get(-1, &st) == -1, "get_stats(-1)");
    unsigned long long released = empty();
    CHECK(released >= 8u << 20, "empty_cache released %llu", released);
    CHECK(fake_stats(0).bytes_in_use == 0, "driver still holds %llu", fake_stats(0).bytes_in_use);
    st.size = sizeof st;
    CHECK(get(0, &st) == 0 && st.fences >= 1 && st.fence_ns > 0,
          "the empty cache's fence and its time: %llu fences, %llu ns", st.fences, st.fence_ns);
    /* A caller built against version 1: filled up to `arenas`, nothing past it touched. */
    gmshim_stats_t v1;
    memset(&v1, 0xab, sizeof v1);
    v1.size = GMSHIM_STATS_V1_SIZE;
    CHECK(get(0, &v1) == 0 && v1.size == GMSHIM_STATS_V1_SIZE && v1.allocs == st.allocs && v1.arenas == st.arenas,
          "a version 1 struct: allocs %llu arenas %llu", v1.allocs, v1.arenas);
    CHECK(v1.fence_ns == 0xababababababababull && v1.fence_poll_ns == 0xababababababababull,
          "a version 1 struct written past its end");
    v1.size = GMSHIM_STATS_V1_SIZE + 8;
    CHECK(get(0, &v1) == -1, "get_stats must refuse a size of no version");
    CHECK(limit(0, 16u << 20) == 0, "set_limit");
    CHECK(cudaMalloc(&p, 32u << 20) == cudaErrorMemoryAllocation, "32 MiB under a 16 MiB cap");
    cudaGetLastError();
    size_t f, t;
    CUDA_OK(cudaMemGetInfo(&f, &t));
    CHECK(t == 16u << 20, "total under the cap: %zu", t);
    CHECK(limit(0, 0) == 0, "remove the cap");
    CUDA_OK(cudaMalloc(&p, 32u << 20));
    CUDA_OK(cudaFree(p));
    CHECK(limit(-3, 1) == -1, "set_limit(-3)");
    printf("ok\n");
    return 0;
}
