/* What a host may do to itself, which gmshim must neither worsen nor hide. The first argument
 * picks: "closed-stdio" (the program closes 0, 1 and 2 before its first CUDA call, then prints,
 * as a daemon or a `prog >&-` would: its output must go nowhere, not into the log), "ignore-segv"
 * and "ignore-ill" (the program ignores the signal, then faults: the kernel ends it, as it would
 * without gmshim, instead of a spin), "sent-ignored" (an ignored SIGSEGV sent with kill stays
 * ignored and the program exits 0), "small-address-space" (the program limits its address space
 * to what it has plus 48 MiB, then allocates and uses 24 MiB of host memory between CUDA calls:
 * as without gmshim, it must get it). */
#include "itest.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

static void some_pairs(int n)
{
    for (int i = 0; i < n; i++) {
        void *p;
        CUDA_OK(cudaMalloc(&p, 4096));
        CUDA_OK(cudaFree(p));
    }
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "closed-stdio")) {
        close(0);
        close(1);
        close(2);
        some_pairs(1000);
        for (int i = 0; i < 1000; i++)
            printf("the host's own output line %d, which must not reach the log\n", i);
        fflush(stdout);
        /* A file the program opens now gets the lowest free descriptor, as without gmshim. */
        int fd = open("/dev/null", O_WRONLY);
        some_pairs(1000);
        return fd == 0 ? 0 : 3;
    }
    if (!strcmp(mode, "ignore-segv")) {
        signal(SIGSEGV, SIG_IGN);
        some_pairs(10);
        /* A page the program may not touch (not NULL: UBSan would stop a NULL store itself). */
        volatile int *bad = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        *bad = 1;
        return 4;
    }
    if (!strcmp(mode, "ignore-ill")) {
        signal(SIGILL, SIG_IGN);
        some_pairs(10);
        __builtin_trap();
    }
    if (!strcmp(mode, "sent-ignored")) {
        signal(SIGSEGV, SIG_IGN);
        some_pairs(10);
        kill(getpid(), SIGSEGV);
        some_pairs(10);
        return 0;
    }
    if (!strcmp(mode, "small-address-space")) {
        long pages = 0;
        FILE *f = fopen("/proc/self/statm", "r");
        CHECK(f && fscanf(f, "%ld", &pages) == 1, "cannot read /proc/self/statm");
        fclose(f);
        struct rlimit lim;
        lim.rlim_cur = lim.rlim_max = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + (48u << 20);
        CHECK(setrlimit(RLIMIT_AS, &lim) == 0, "setrlimit");
        some_pairs(10);
        char *mine = malloc(24u << 20);
        CHECK(mine != NULL, "the program's own 24 MiB did not fit in its address space");
        memset(mine, 1, 24u << 20);
        some_pairs(10);
        free(mine);
        return 0;
    }
    fprintf(stderr, "usage: host_hostile closed-stdio|ignore-segv|ignore-ill|sent-ignored|small-address-space\n");
    return 2;
}
