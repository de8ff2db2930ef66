/* The log writer maps the extent after the one being written and has its pages faulted in by
 * its helper thread before the writers reach it (the thread that wrote the record does not take
 * the 16 MiB of faults); at exit the file is cut back to the chunks written. Run with GMSHIM_LOG
 * set to a plain path (no %p). */
#include "itest.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <time.h>

#define EXTENT ((long long)256 * 65536)

/* Resident kB of each mapping of `path` in this process, from /proc/self/smaps; returns how many. */
static int mapped_rss_kb(const char *path, long long *kb, int max)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    CHECK(f, "cannot read /proc/self/smaps");
    char line[4096];
    int n = 0, in = 0;
    while (fgets(line, sizeof line, f)) {
        if (strchr(line, '-') && strchr(line, '/') && line[0] != ' ') /* a mapping's first line */
            in = strstr(line, path) != NULL && n < max;
        else if (in && !strncmp(line, "Rss:", 4)) {
            kb[n++] = atoll(line + 4);
            in = 0;
        }
    }
    fclose(f);
    return n;
}

/* This thread's page faults for faulting in 16 MiB of a new file beside `path` the way the writer
 * does, or -1. */
static long populate_faults(const char *path)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.probe", path);
    int fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        return -1;
    unlink(tmp);
    long faults = -1;
    void *m = ftruncate(fd, EXTENT) == 0 ? mmap(NULL, EXTENT, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    if (m != MAP_FAILED) {
        struct rusage a, b;
        getrusage(RUSAGE_THREAD, &a);
        if (madvise(m, EXTENT, MADV_POPULATE_WRITE) == 0) {
            getrusage(RUSAGE_THREAD, &b);
            faults = b.ru_minflt - a.ru_minflt + b.ru_majflt - a.ru_majflt;
        }
        munmap(m, EXTENT);
    }
    close(fd);
    return faults;
}

int main(void)
{
    const char *path = getenv("GMSHIM_LOG");
    CHECK(gm_present() && path && *path == '/', "run me under LD_PRELOAD=libgmshim.so with GMSHIM_LOG=/path");
    void *p;
    struct rusage before, after;
    getrusage(RUSAGE_THREAD, &before);
    CUDA_OK(cudaMalloc(&p, 4096)); /* the first records: chunk 0 of extent 0 */
    CUDA_OK(cudaFree(p));
    getrusage(RUSAGE_THREAD, &after);
    long faults = after.ru_minflt - before.ru_minflt + after.ru_majflt - before.ru_majflt;
    struct stat st;
    CHECK(stat(path, &st) == 0, "no log at %s", path);
    CHECK(st.st_size > 2 * EXTENT && st.st_size < 2 * EXTENT + (1 << 20),
          "the log is %lld bytes, not a header and two extents", (long long)st.st_size);
#ifdef MADV_POPULATE_WRITE
    void *probe = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    int supported = probe != MAP_FAILED && madvise(probe, 4096, MADV_POPULATE_WRITE) == 0;
    if (supported) {
        long extent_faults = populate_faults(path);
        if (dlsym(RTLD_DEFAULT, "__tsan_init")) /* its shadow memory faults on the writing thread */
            printf("under ThreadSanitizer: the writing thread's faults not checked\n");
        else if (extent_faults >= 1024) /* else too few to tell from the first call's own */
            CHECK(faults < extent_faults / 2, "the writing thread took %ld page faults (16 MiB faulted "
                  "in: %ld): it faulted the extent ahead in itself", faults, extent_faults);
        else
            printf("16 MiB faulted in with %ld faults here: the writing thread's not checked\n", extent_faults);
        long long kb[8];
        int n = 0, ahead = 0;
        for (int tries = 0; tries < 500 && ahead != 1; tries++) { /* up to 5 s for the helper */
            if (tries)
                nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
            n = mapped_rss_kb(path, kb, 8);
            ahead = 0;
            for (int i = 0; i < n; i++)
                ahead += kb[i] >= EXTENT / 1024;
        }
        CHECK(ahead == 1, "%d of %d mappings of the log are wholly resident, expected the extent ahead", ahead, n);
    } else {
        printf("MADV_POPULATE_WRITE not supported here: residency not checked\n");
    }
#endif
    printf("ok: %lld bytes while writing, %ld page faults in the writing thread\n", (long long)st.st_size, faults);
    return 0;
}
