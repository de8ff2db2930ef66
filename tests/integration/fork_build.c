/* Forks while gmshim builds the PyTorch bridge: a thread's first allocation from a library named
 * as PyTorch's allocator (argv[1], a stand-in libc10_cuda.so inside a fake torch tree) starts the
 * bridge's build with a slow stub compiler, which touches $FORK_BUILD_STARTED when it begins.
 * From then until that allocation returns this thread forks, again and again: each child marks,
 * allocates and frees (its own call and one from the allocator library) and exits; a child that
 * has not exited within 5 s is a hang (killed and counted). Prints the counts; exits 0 only
 * when at least argv[2] forks came during the build and none hung or failed. */
#include "itest.h"

#include <pthread.h>
#include <sys/stat.h>

typedef cudaError_t (*segment_alloc_fn)(void **, size_t);
typedef cudaError_t (*segment_free_fn)(void *);

static segment_alloc_fn segment_alloc;
static segment_free_fn segment_free;
static int built;

static void *first_allocation(void *arg)
{
    (void)arg;
    void *p = NULL;
    if (segment_alloc(&p, 1 << 20) == cudaSuccess)
        segment_free(p);
    __atomic_store_n(&built, 1, __ATOMIC_RELEASE);
    return NULL;
}

static int child(int (*mark)(const char *))
{
    if (mark)
        mark("child");
    void *p = NULL, *q = NULL;
    if (cudaMalloc(&p, 4096) == cudaSuccess)
        cudaFree(p);
    if (segment_alloc(&q, 8192) == cudaSuccess)
        segment_free(q);
    return 0;
}

int main(int argc, char **argv)
{
    CHECK(argc > 2, "usage: fork_build LIBC10_CUDA MIN_FORKS");
    const char *started = getenv("FORK_BUILD_STARTED");
    CHECK(started, "FORK_BUILD_STARTED is not set");
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    CHECK(h, "%s", dlerror());
    segment_alloc = (segment_alloc_fn)dlsym(h, "standin_segment_alloc");
    segment_free = (segment_free_fn)dlsym(h, "standin_segment_free");
    CHECK(segment_alloc && segment_free, "the stand-in has no segment functions");
    int (*mark)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "gmshim_mark");

    /* gmshim started by the program itself first, as PyTorch's own first calls would. */
    void *p = NULL;
    CUDA_OK(cudaMalloc(&p, 4096));
    CUDA_OK(cudaFree(p));

    pthread_t t;
    CHECK(pthread_create(&t, NULL, first_allocation, NULL) == 0, "pthread_create");
    struct stat st;
    for (uint64_t end = itest_now_us() + 20000000u; stat(started, &st) != 0 && itest_now_us() < end;)
        usleep(1000);
    int during = 0, hung = 0, failed = 0, forks = 0;
    while (!__atomic_load_n(&built, __ATOMIC_ACQUIRE)) {
        fflush(stdout);
        pid_t c = fork();
        CHECK(c >= 0, "fork");
        if (c == 0)
            _exit(child(mark));
        int still = !__atomic_load_n(&built, __ATOMIC_ACQUIRE);
        int r = itest_wait_for(c, 5000);
        forks++;
        during += still;
        hung += r < 0;
        failed += r > 0;
        usleep(2000);
    }
    pthread_join(t, NULL);
    printf("fork_build: %d forks, %d during the build, %d hung, %d failed\n", forks, during, hung, failed);
    return hung || failed || during < atoi(argv[2]) ? 1 : 0;
}
