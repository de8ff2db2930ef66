/* The log writer maps the extent after the one being written and faults its pages in before the
 * writers reach it; at exit the file is cut back to the chunks written. Run with GMSHIM_LOG set
 * to a plain path (no %p). */
#include "itest.h"

#include <sys/mman.h>
#include <sys/stat.h>

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

int main(void)
{
    const char *path = getenv("GMSHIM_LOG");
    CHECK(gm_present() && path && *path == '/', "run me under LD_PRELOAD=libgmshim.so with GMSHIM_LOG=/path");
    void *p;
    CUDA_OK(cudaMalloc(&p, 4096)); /* the first records: chunk 0 of extent 0 */
    CUDA_OK(cudaFree(p));
    struct stat st;
    CHECK(stat(path, &st) == 0, "no log at %s", path);
    CHECK(st.st_size > 2 * EXTENT && st.st_size < 2 * EXTENT + (1 << 20),
          "the log is %lld bytes, not a header and two extents", (long long)st.st_size);
#ifdef MADV_POPULATE_WRITE
    void *probe = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    int supported = probe != MAP_FAILED && madvise(probe, 4096, MADV_POPULATE_WRITE) == 0;
    if (supported) {
        long long kb[8];
        int n = mapped_rss_kb(path, kb, 8);
        int ahead = 0;
        for (int i = 0; i < n; i++)
            ahead += kb[i] >= EXTENT / 1024;
        CHECK(ahead == 1, "%d of %d mappings of the log are wholly resident, expected the extent ahead", ahead, n);
    } else {
        printf("MADV_POPULATE_WRITE not supported here: residency not checked\n");
    }
#endif
    printf("ok: %lld bytes while writing\n", (long long)st.st_size);
    return 0;
}
