/* GMSHIM_CACHE_LIMIT=64M. Without an argument: after every free (and a probe allocation) the
 * driver never holds more than the live blocks' segments plus the cap (plus the block whose fence
 * may still be in flight). With "idle": frees while the GPU still works on the blocks, then no
 * allocation at all: once the GPU is done, the cap holds within the trimmer's poll period. With
 * "capture": the same frees made while a capture runs: nothing is released, fenced or queried
 * until it ends (the capture stays valid), then the cap holds. */
#include "itest.h"

#include <time.h>
#include <unistd.h>

#define N 16
#define SIZE (32u << 20) /* each its own 32 MiB segment */
#define CAP (64u << 20)

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void touch(void *p)
{
    *(volatile char *)p = 1;
}

/* Waits up to bound_ms for reserved and the driver's figure to come down to at most `want`;
 * returns the time it took (or more than bound_ms). */
static double wait_for_cap(size_t want, double bound_ms, unsigned long long *reserved)
{
    double t0 = now_ms(), t;
    gmshim_stats_t st;
    for (;;) {
        gm_stats(0, &st);
        *reserved = st.reserved.current;
        t = now_ms();
        if ((*reserved <= want && fake_stats(0).bytes_in_use <= want) || t - t0 > bound_ms)
            return t - t0;
        usleep(1000);
    }
}

/* Frees all but `live` blocks while a kernel on a non-blocking stream still runs, waits for the
 * fake GPU, and then only watches: reserved must come down to live + cap within `bound_ms`. */
static int idle(double bound_ms)
{
    enum { LIVE = 2 };
    void *p[N];
    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    for (int i = 0; i < N; i++)
        CUDA_OK(cudaMalloc(&p[i], SIZE));
    CUDA_OK(fakecuda_launch(s, touch, p[N - 1], 100000)); /* the GPU is busy for 0.1 s more */
    for (int i = LIVE; i < N; i++)
        CUDA_OK(cudaFree(p[i]));
    gmshim_stats_t st;
    gm_stats(0, &st);
    size_t live = (size_t)LIVE * SIZE;
    CHECK(st.reserved.current > live + CAP, "the cap held before the GPU was done (reserved %llu): the test "
          "shows nothing", st.reserved.current);
    fakecuda_drain();
    unsigned long long reserved;
    double t = wait_for_cap(live + CAP, bound_ms, &reserved);
    CHECK(t <= bound_ms,
          "%.0f ms after the GPU finished, with no allocation since the frees, gmshim reserves %llu and the "
          "driver holds %llu bytes: live %zu + cap %u", t, reserved, fake_stats(0).bytes_in_use, live, CAP);
    gm_stats(0, &st);
    CHECK(st.allocs == N && st.allocated.current == live, "allocs %llu, allocated %llu", st.allocs,
          st.allocated.current);
    for (int i = 0; i < LIVE; i++)
        CUDA_OK(cudaFree(p[i]));
    CUDA_OK(cudaStreamDestroy(s));
    printf("ok: the cap held %.1f ms after the GPU finished (%llu bytes reserved)\n", t, reserved);
    return 0;
}

static int capture(double bound_ms)
{
    void *p[N];
    cudaStream_t s, c;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUDA_OK(cudaStreamCreateWithFlags(&c, cudaStreamNonBlocking));
    for (int i = 0; i < N; i++)
        CUDA_OK(cudaMalloc(&p[i], SIZE));
    CUDA_OK(fakecuda_launch(s, touch, p[0], 20000));
    CUDA_OK(cudaStreamBeginCapture(c, cudaStreamCaptureModeGlobal));
    fakecuda_reset_stats();
    size_t during = fake_stats(0).bytes_in_use;
    for (int i = 0; i < N; i++)
        CUDA_OK(cudaFree(p[i]));
    CUDA_OK(fakecuda_launch(c, NULL, NULL, 0));
    usleep(150000); /* fifteen poll periods, and the GPU long done */
    struct fakecuda_stats f = fake_stats(0);
    CHECK(f.bytes_in_use == during && f.frees == 0, "memory went back during the capture: %llu -> %llu",
          (unsigned long long)during, f.bytes_in_use);
    CHECK(f.event_records == 0 && f.event_queries == 0 && f.unsafe_calls == 0,
          "during the capture: %llu event records, %llu queries, %llu unsafe calls", f.event_records,
          f.event_queries, f.unsafe_calls);
    cudaGraph_t g;
    CUDA_OK(cudaStreamEndCapture(c, &g));
    f = fake_stats(0);
    CHECK(f.unsafe_calls == 0 && f.captures_invalidated == 0, "unsafe calls %llu, invalidated %llu",
          f.unsafe_calls, f.captures_invalidated);
    CUDA_OK(cudaGraphDestroy(g));
    unsigned long long reserved;
    double t = wait_for_cap(CAP, bound_ms, &reserved);
    CHECK(t <= bound_ms, "%.0f ms after the capture ended gmshim still reserves %llu bytes, the driver holds "
          "%llu: cap %u", t, reserved, fake_stats(0).bytes_in_use, CAP);
    CUDA_OK(cudaStreamDestroy(s));
    CUDA_OK(cudaStreamDestroy(c));
    printf("ok: nothing released during the capture, the cap held %.1f ms after it\n", t);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "idle"))
        return idle(argc > 2 ? atof(argv[2]) : 250);
    if (argc > 1 && !strcmp(argv[1], "capture"))
        return capture(argc > 2 ? atof(argv[2]) : 250);
    void *p[N];
    for (int i = 0; i < N; i++)
        CUDA_OK(cudaMalloc(&p[i], SIZE));
    for (int i = 0; i < N; i++) {
        CUDA_OK(cudaFree(p[i]));
        fakecuda_drain();
        /* An allocation miss (a small one, in its own small segment) harvests completed fences
         * and applies the cap. Each probe of a size of its own: the thread's cache holds the
         * earlier ones for their own sizes, so that this one is the arena's. */
        void *probe;
        CUDA_OK(cudaMalloc(&probe, (1u << 20) - (size_t)i * 4096));
        CUDA_OK(cudaFree(probe));
        size_t live = (size_t)(N - 1 - i) * SIZE;
        struct fakecuda_stats f = fake_stats(0);
        CHECK(f.bytes_in_use <= live + CAP + SIZE + (2u << 20),
              "after %d frees the driver holds %llu bytes: live %zu + cap %u (+ one in flight)",
              i + 1, f.bytes_in_use, live, CAP);
    }
    gmshim_stats_t st;
    gm_stats(0, &st);
    CHECK(st.driver_frees >= N - 3, "driver frees %llu", st.driver_frees);
    printf("ok: %llu segments returned\n", st.driver_frees);
    return 0;
}
