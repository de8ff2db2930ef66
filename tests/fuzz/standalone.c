/* A stand-in for libFuzzer where clang cannot link one: runs LLVMFuzzerTestOneInput on every
 * seed, then on random mutations of them (bit flips, interesting values, cuts, splices) for a
 * number of runs or seconds. It must never hide a crash: the input that crashed is saved. */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct seed {
    uint8_t *data;
    size_t size;
} seed_t;

static seed_t *seeds;
static size_t nseeds, capseeds;
static const uint8_t *current;
static size_t current_size;
static const char *crash_path = "fuzz-crash.gmlog";

static void add_seed(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return;
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? cap * 2 : 65536;
            uint8_t *n = realloc(buf, cap);
            if (!n)
                break;
            buf = n;
        }
        size_t r = fread(buf + len, 1, cap - len, f);
        if (!r)
            break;
        len += r;
    }
    fclose(f);
    if (nseeds == capseeds) {
        capseeds = capseeds ? capseeds * 2 : 16;
        seeds = realloc(seeds, capseeds * sizeof *seeds);
        if (!seeds)
            exit(1);
    }
    seeds[nseeds++] = (seed_t){buf, len};
}

static void add_path(const char *path)
{
    struct stat st;
    if (stat(path, &st))
        return;
    if (!S_ISDIR(st.st_mode)) {
        add_seed(path);
        return;
    }
    DIR *d = opendir(path);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", path, e->d_name);
        add_seed(p);
    }
    if (d)
        closedir(d);
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;

static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void on_crash(int sig)
{
    int fd = open(crash_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
        ssize_t w = write(fd, current, current_size);
        (void)w;
        close(fd);
    }
    static const char msg[] = "standalone fuzzer: crash; the input is in the crash file\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    signal(sig, SIG_DFL);
    raise(sig);
}

static size_t mutate(uint8_t *buf, size_t size, size_t cap)
{
    static const uint64_t interesting[] = {0, 1, 2, 7, 8, 0x7f, 0x80, 0xff, 0x100, 0xffff, 0x10000, 0x7fffffff,
                                           0x80000000u, 0xffffffffu, 0xffffffffffffffffull, 0x8000000000000000ull};
    int n = 1 + (int)(rnd() % 8);
    for (int k = 0; k < n && size; k++) {
        size_t at = (size_t)(rnd() % size);
        switch (rnd() % 8) {
        case 0: buf[at] ^= (uint8_t)(1u << (rnd() % 8)); break;
        case 1: buf[at] = (uint8_t)rnd(); break;
        case 2: {
            uint64_t v = interesting[rnd() % (sizeof interesting / sizeof interesting[0])];
            size_t w = (size_t)1 << (rnd() % 4);
            if (at + w <= size)
                memcpy(buf + at, &v, w);
            break;
        }
        case 3: size = at; break; /* cut */
        case 4: { /* copy a range from another seed */
            const seed_t *s = &seeds[rnd() % nseeds];
            if (s->size) {
                size_t from = (size_t)(rnd() % s->size), len = 1 + (size_t)(rnd() % 64);
                if (from + len > s->size)
                    len = s->size - from;
                if (at + len > size)
                    len = size - at;
                memcpy(buf + at, s->data + from, len);
            }
            break;
        }
        case 5: { /* duplicate a block (extends when there is room) */
            size_t len = 1 + (size_t)(rnd() % 256);
            if (at + len <= size && size + len <= cap) {
                memmove(buf + at + len, buf + at, size - at);
                size += len;
            }
            break;
        }
        case 6: { /* record-sized overwrite with the start of the file's records */
            size_t len = 8 * (1 + (size_t)(rnd() % 6));
            size_t from = (size_t)(rnd() % size);
            if (from + len <= size && at + len <= size)
                memmove(buf + at, buf + from, len);
            break;
        }
        default: buf[at] = 0; break;
        }
    }
    return size;
}

int main(int argc, char **argv)
{
    long runs = -1;
    double max_time = -1;
    for (int i = 1; i < argc; i++) {
        if (!strncmp(argv[i], "-runs=", 6))
            runs = atol(argv[i] + 6);
        else if (!strncmp(argv[i], "-max_total_time=", 16))
            max_time = atof(argv[i] + 16);
        else if (!strncmp(argv[i], "-seed=", 6))
            rng = (uint64_t)atoll(argv[i] + 6) * 0x9E3779B97F4A7C15ull | 1;
        else if (!strncmp(argv[i], "-artifact_prefix=", 17)) {
            static char path[4096];
            snprintf(path, sizeof path, "%scrash-standalone", argv[i] + 17);
            crash_path = path;
        }
        else if (argv[i][0] != '-')
            add_path(argv[i]);
    }
    if (runs < 0 && max_time < 0)
        runs = 2000;
    signal(SIGSEGV, on_crash);
    signal(SIGBUS, on_crash);
    signal(SIGABRT, on_crash);
    signal(SIGFPE, on_crash);
    signal(SIGILL, on_crash);
    static const uint8_t empty[1];
    current = empty;
    current_size = 0;
    LLVMFuzzerTestOneInput(empty, 0);
    for (size_t i = 0; i < nseeds; i++) {
        current = seeds[i].data;
        current_size = seeds[i].size;
        LLVMFuzzerTestOneInput(seeds[i].data, seeds[i].size);
    }
    if (!nseeds) {
        fprintf(stderr, "standalone fuzzer: no seeds given; only the empty input ran\n");
        return 0;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long done = 0;
    for (;; done++) {
        if (runs >= 0 && done >= runs)
            break;
        if (max_time >= 0 && (done & 15) == 0) {
            clock_gettime(CLOCK_MONOTONIC, &t1);
            if ((double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9 >= max_time)
                break;
        }
        const seed_t *s = &seeds[rnd() % nseeds];
        size_t cap = s->size + 1024;
        uint8_t *buf = malloc(cap);
        if (!buf)
            return 1;
        memcpy(buf, s->data, s->size);
        size_t size = mutate(buf, s->size, cap);
        current = buf;
        current_size = size;
        LLVMFuzzerTestOneInput(buf, size);
        free(buf);
    }
    fprintf(stderr, "standalone fuzzer: %zu seeds, %ld mutated inputs, no crash\n", nseeds, done);
    return 0;
}
