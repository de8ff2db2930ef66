/* Tests of CUPTI observation (shim/cupti.c) against the fake CUPTI and fake driver
 * (tests/fake_cupti/): where libcupti is looked for,
 * injection mode and preload + GMSHIM_CUPTI=1 end to end (the logs read back by hand with the
 * layouts of gmlog.h), and the soft failures: no libcupti, CUPTI taken, CUPTI unusable. */
#include "../../shim/cupti.h"
#include "evlog.h"
#include "options.h"
#include "stacks.h"
#include "suites.h"

#include <cupti.h>
#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MiB (1ull << 20)
#define NCAND 48
#define CLEN 4096

/* ---- the log, read back --------------------------------------------------------------------- */

typedef struct l_alloc {
    uint64_t ptr, size, lib;
    uint32_t site;
    int dev, kind, freed;
} l_alloc_t;

typedef struct logv {
    char mode[32];
    l_alloc_t alloc[8192];
    int nalloc;
    struct { uint64_t ptr; int dev, kind; } free[8192];
    int nfree;
    gmlog_oom_t oom[16];
    int noom;
    uint64_t seg[1024];
    int nseg;
    struct { uint32_t id; char s[256]; } str[256];
    int nstr;
    struct { uint32_t id; int n; uint64_t f[64]; } site[512];
    int nsite;
    struct { uint32_t id; char path[512]; } mod[128];
    int nmod;
    int devrec[8];
} logv_t;

static const char *log_string(const logv_t *l, uint64_t id)
{
    for (int i = 0; i < l->nstr; i++)
        if (l->str[i].id == id)
            return l->str[i].s;
    return "";
}

static void read_record(logv_t *l, const uint8_t *p, size_t len)
{
    const gmlog_rec_t *h = (const gmlog_rec_t *)p;
    int kind = (h->flags & GMLOG_KIND_MASK) >> GMLOG_KIND_SHIFT;
    switch (h->type) {
    case GMLOG_ALLOC: {
        const gmlog_alloc_t *a = (const gmlog_alloc_t *)p;
        if (l->nalloc < 8192)
            l->alloc[l->nalloc++] = (l_alloc_t){a->ptr, a->size & GMLOG_SIZE_MASK, len >= 40 ? a->block : 0,
                                               a->site, h->device, kind, 0};
        break;
    }
    case GMLOG_FREE: {
        const gmlog_free_t *f = (const gmlog_free_t *)p;
        if (l->nfree < 8192) {
            l->free[l->nfree].ptr = f->ptr;
            l->free[l->nfree].dev = h->device;
            l->free[l->nfree++].kind = kind;
        }
        /* The latest live allocation of that pointer is freed. */
        for (int i = l->nalloc - 1; i >= 0; i--)
            if (l->alloc[i].ptr == f->ptr && !l->alloc[i].freed) {
                l->alloc[i].freed = 1;
                break;
            }
        break;
    }
    case GMLOG_OOM:
        if (l->noom < 16)
            memcpy(&l->oom[l->noom++], p, sizeof(gmlog_oom_t));
        break;
    case GMLOG_SEGMENT_ALLOC:
        if (l->nseg < 1024)
            l->seg[l->nseg++] = ((const gmlog_segment_t *)p)->base;
        break;
    case GMLOG_STRING: {
        const gmlog_string_t *s = (const gmlog_string_t *)p;
        if (l->nstr < 256) {
            l->str[l->nstr].id = s->id;
            snprintf(l->str[l->nstr++].s, 256, "%.*s", (int)s->len, (const char *)(s + 1));
        }
        break;
    }
    case GMLOG_SITE: {
        const gmlog_site_t *s = (const gmlog_site_t *)p;
        if (l->nsite < 512) {
            int n = s->native < 64 ? s->native : 64;
            l->site[l->nsite].id = s->id;
            l->site[l->nsite].n = n;
            memcpy(l->site[l->nsite++].f, s + 1, (size_t)n * 8);
        }
        break;
    }
    case GMLOG_MODULE: {
        const gmlog_module_t *m = (const gmlog_module_t *)p;
        if (l->nmod < 128) {
            l->mod[l->nmod].id = m->id;
            snprintf(l->mod[l->nmod++].path, 512, "%.*s", (int)m->path_len,
                     (const char *)(m + 1) + m->build_id_len);
        }
        break;
    }
    case GMLOG_DEVICE:
        if (h->device < 8)
            l->devrec[h->device]++;
        break;
    default:
        break;
    }
}

/* Reads the one log in `dir`. */
static logv_t *read_log(const char *dir)
{
    char path[4096] = "";
    DIR *d = opendir(dir);
    struct dirent *e;
    int logs = 0;
    while (d && (e = readdir(d)))
        if (strstr(e->d_name, ".gmlog")) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            logs++;
        }
    if (d)
        closedir(d);
    ck_assert_msg(logs == 1, "%d logs in %s, expected one", logs, dir);
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    size_t size = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc(size);
    ck_assert(buf != NULL && fread(buf, 1, size, f) == size);
    fclose(f);
    logv_t *l = calloc(1, sizeof *l);
    ck_assert(l != NULL);
    const gmlog_file_header_t *hdr = (const gmlog_file_header_t *)buf;
    ck_assert_msg(size >= sizeof *hdr && !memcmp(hdr->magic, GMLOG_MAGIC, 8), "%s is not a gmshim log", path);
    for (size_t at = sizeof *hdr; at + sizeof(gmlog_meta_t) <= sizeof *hdr + hdr->meta_size;) {
        const gmlog_meta_t *m = (const gmlog_meta_t *)(buf + at);
        if (m->tag == GMLOG_META_END)
            break;
        if (m->tag == GMLOG_META_MODE)
            snprintf(l->mode, sizeof l->mode, "%.*s", (int)m->len, (const char *)(m + 1));
        at += sizeof *m + ((m->len + 7) & ~7u);
    }
    for (size_t c = hdr->header_size; c + hdr->chunk_size <= size; c += hdr->chunk_size) {
        const gmlog_chunk_header_t *ch = (const gmlog_chunk_header_t *)(buf + c);
        if (ch->magic != GMLOG_CHUNK_MAGIC)
            continue;
        for (size_t at = sizeof *ch; at + 8 <= hdr->chunk_size;) {
            const gmlog_rec_t *r = (const gmlog_rec_t *)(buf + c + at);
            if (r->type == GMLOG_END_OF_CHUNK || !r->len8 || at + r->len8 * 8u > hdr->chunk_size)
                break;
            read_record(l, buf + c + at, r->len8 * 8u);
            at += r->len8 * 8u;
        }
    }
    free(buf);
    return l;
}

static int count_allocs(const logv_t *l, int kind, uint64_t size, const char *lib)
{
    int n = 0;
    for (int i = 0; i < l->nalloc; i++)
        n += l->alloc[i].kind == kind && (!size || l->alloc[i].size == size) &&
             (!lib || !strcmp(log_string(l, l->alloc[i].lib), lib));
    return n;
}

static int count_kind(const logv_t *l, int kind, int freed_too)
{
    int n = 0;
    for (int i = 0; i < l->nalloc; i++)
        n += l->alloc[i].kind == kind && (!freed_too || l->alloc[i].freed);
    return n;
}

/* ---- running the programs ---------------------------------------------------------------- */

static char fake_home[4096], inject_env[4096];

static void paths(void)
{
    snprintf(fake_home, sizeof fake_home, "CUDA_HOME=%s", build_path("fake_cupti/cuda"));
    snprintf(inject_env, sizeof inject_env, "CUDA_INJECTION64_PATH=%s", build_path("libgmshim.so"));
}

/* Runs a cupti_* program with `env` (NULL-terminated, at most 10) plus a log in a fresh
 * directory, whose name is returned in *dir. */
static int run_prog(const char *prog, const char *arg, int preload, const char *const *env, const char **dir,
                    char **out)
{
    static char logenv[4096];
    *dir = temp_dir();
    snprintf(logenv, sizeof logenv, "GMSHIM_LOG=%s/c-%%p.gmlog", *dir);
    const char *e[16];
    int n = 0;
    e[n++] = logenv;
    e[n++] = "FAKECUDA_MEM=1G";
    /* The fake CUPTI's driver stands in front of the fake runtime's with a virtual memory API of
     * its own for its library's buffers, without cuMemSetAccess: growable ranges would get half of
     * each (a refusal, then the classic pool, with a warning these tests count). The pool's
     * segments are what these programs observe: classic ones, whatever TEST_ENV asks. */
    e[n++] = "GMSHIM_SEGMENTS=classic";
    e[n++] = "GMSHIM_PLAN=0";
    for (int i = 0; env[i] && n < 15; i++)
        e[n++] = env[i];
    e[n] = NULL;
    const char *argv[] = {build_path(prog), arg, NULL};
    return run_program(argv, e, preload, out);
}

static int warnings(const char *out)
{
    int n = 0;
    for (const char *p = out; (p = strstr(p, "gmshim[")); p++)
        n++;
    return n;
}

static long field(const char *out, const char *name)
{
    const char *p = strstr(out, name);
    return p ? strtol(p + strlen(name), NULL, 0) : -1;
}

/* ---- where libcupti is looked for --------------------------------------------------------- */

static int index_of(char *cand, int n, const char *needle)
{
    for (int i = 0; i < n; i++)
        if (strstr(cand + (size_t)i * CLEN, needle))
            return i;
    return -1;
}

START_TEST(test_candidates_follow_the_documented_order)
{
    setenv("CUDA_HOME", "/opt/cudaX", 1);
    unsetenv("GMSHIM_TEST_CUPTI_NO_SYSTEM");
    ck_assert_msg(dlopen(build_path("fake/libcudart.so.13"), RTLD_NOW | RTLD_LOCAL) != NULL, "%s", dlerror());
    ck_assert_msg(dlopen(build_path("fake_cupti/libcuda.so.1"), RTLD_NOW | RTLD_LOCAL) != NULL, "%s", dlerror());
    ck_assert_msg(dlopen(build_path("fake_cupti/site-packages/torch/lib/libtorch_cuda.so"), RTLD_NOW | RTLD_LOCAL),
                  "%s", dlerror());
    static char cand[NCAND * CLEN];
    int n = cupti_candidates(cand, CLEN, NCAND);
    int extras = index_of(cand, n, "/opt/cudaX/extras/CUPTI/lib64/libcupti.so.13");
    int home = index_of(cand, n, "/opt/cudaX/lib64/libcupti.so.13");
    int usr = index_of(cand, n, "/usr/local/cuda/lib64/libcupti.so.13");
    int cudart = index_of(cand, n, "/fake/libcupti.so.13");
    int driver = index_of(cand, n, "/fake_cupti/libcupti.so.13");
    int wheel = index_of(cand, n, "site-packages/nvidia/cu13/lib/libcupti.so.13");
    int wheel2 = index_of(cand, n, "site-packages/nvidia/cuda_cupti/lib/libcupti.so.13");
    ck_assert_msg(extras == 0 && home == 3 && usr == 6, "CUDA_HOME first, then /usr/local/cuda: %d %d %d",
                  extras, home, usr);
    ck_assert_msg(usr < cudart && cudart < driver && driver < wheel && wheel < wheel2,
                  "then next to libcudart, libcuda, then the torch wheels: %d %d %d %d %d", usr, cudart, driver,
                  wheel, wheel2);
    ck_assert_msg(n >= 3 && !strcmp(cand + (size_t)(n - 3) * CLEN, "libcupti.so.13") &&
                  !strcmp(cand + (size_t)(n - 1) * CLEN, "libcupti.so"),
                  "the loader's own search last: %s", n ? cand + (size_t)(n - 1) * CLEN : "(none)");
    setenv("GMSHIM_TEST_CUPTI_NO_SYSTEM", "1", 1);
    n = cupti_candidates(cand, CLEN, NCAND);
    ck_assert_msg(index_of(cand, n, "/usr/local/cuda") < 0 && index_of(cand, n, "/") == 0 &&
                  strchr(cand + (size_t)(n - 1) * CLEN, '/'),
                  "GMSHIM_TEST_CUPTI_NO_SYSTEM leaves out the system paths (%d candidates)", n);
    unsetenv("CUDA_HOME");
    unsetenv("GMSHIM_TEST_CUPTI_NO_SYSTEM");
}
END_TEST

/* In-process: the log on, then cupti_start finds libcupti as a real process would. */
static void start_here(const char *dir)
{
    char log[4096];
    snprintf(log, sizeof log, "%s/u.gmlog", dir);
    setenv("GMSHIM_LOG", log, 1);
    options_reset();
    evlog_open();
    stacks_init();
}

START_TEST(test_found_through_the_torch_wheel)
{
    unsetenv("CUDA_HOME");
    setenv("GMSHIM_TEST_CUPTI_NO_SYSTEM", "1", 1);
    start_here(temp_dir());
    ck_assert(dlopen(build_path("fake_cupti/site-packages/torch/lib/libtorch_cuda.so"), RTLD_NOW | RTLD_LOCAL));
    ck_assert_int_eq(cupti_start(GMLOG_KIND_FOREIGN), 0);
    const char *p = cupti_loaded_path();
    ck_assert_msg(p && strstr(p, "site-packages/nvidia/cu13/lib/libcupti.so.13"), "loaded %s", p ? p : "nothing");
    ck_assert_int_eq(cupti_start(GMLOG_KIND_FOREIGN), 0); /* once only, same answer */
    evlog_close(GMLOG_CLOSE_EXIT);
}
END_TEST

START_TEST(test_found_through_cuda_home)
{
    paths();
    setenv("CUDA_HOME", strchr(fake_home, '=') + 1, 1);
    setenv("GMSHIM_TEST_CUPTI_NO_SYSTEM", "1", 1);
    start_here(temp_dir());
    ck_assert_int_eq(cupti_start(GMLOG_KIND_FOREIGN), 0);
    const char *p = cupti_loaded_path();
    ck_assert_msg(p && strstr(p, "fake_cupti/cuda/lib64/libcupti.so.13"), "loaded %s", p ? p : "nothing");
    evlog_close(GMLOG_CLOSE_EXIT);
}
END_TEST

static int cupti_started;

static void start_cupti(void)
{
    cupti_started = cupti_start(GMLOG_KIND_FOREIGN);
}

/* A libcupti in a directory its group may write to (a copy of the fake one, under CUDA_HOME):
 * another user could have planted it, so it is not loaded, and the one warning says why. */
START_TEST(test_a_cupti_in_a_group_writable_directory_is_not_loaded)
{
    const char *home = temp_dir();
    char lib[300], cmd[12000];
    snprintf(lib, sizeof lib, "%s/lib64", home);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp '%s' '%s/' && chmod 0775 '%s'", lib,
             build_path("fake_cupti/cuda/lib64/libcupti.so.13"), lib, lib);
    ck_assert_msg(system(cmd) == 0, "%s", cmd);
    setenv("CUDA_HOME", home, 1);
    setenv("GMSHIM_TEST_CUPTI_NO_SYSTEM", "1", 1);
    start_here(temp_dir());
    const char *err = stderr_of(start_cupti);
    const char *p = cupti_loaded_path();
    ck_assert_msg(cupti_started != 0 && !p, "loaded %s from a group-writable directory", p ? p : "?");
    ck_assert_msg(strstr(err, "writable by its group") && strstr(err, lib), "the warning does not say why:\n%s", err);
    evlog_close(GMLOG_CLOSE_EXIT);
}
END_TEST

START_TEST(test_an_already_loaded_cupti_is_used_first)
{
    paths();
    setenv("CUDA_HOME", strchr(fake_home, '=') + 1, 1);
    start_here(temp_dir());
    const char *wheel = build_path("fake_cupti/site-packages/nvidia/cu13/lib/libcupti.so.13");
    ck_assert_msg(dlopen(wheel, RTLD_NOW | RTLD_LOCAL) != NULL, "%s", dlerror());
    ck_assert_int_eq(cupti_start(GMLOG_KIND_FOREIGN), 0);
    const char *p = cupti_loaded_path();
    ck_assert_msg(p && strstr(p, "site-packages/nvidia/cu13"), "a second copy from CUDA_HOME: %s", p ? p : "nothing");
    evlog_close(GMLOG_CLOSE_EXIT);
}
END_TEST

START_TEST(test_no_log_no_subscription)
{
    paths();
    setenv("CUDA_HOME", strchr(fake_home, '=') + 1, 1);
    setenv("GMSHIM_LOG", "off", 1);
    options_reset();
    evlog_open();
    ck_assert_int_eq(cupti_start(GMLOG_KIND_FOREIGN), -1);
    ck_assert_msg(cupti_loaded_path() == NULL, "libcupti loaded for nothing");
}
END_TEST

/* ---- injection mode ------------------------------------------------------------------------ */

START_TEST(test_injection_logs_every_driver_allocation_as_observed)
{
    paths();
    const char *env[] = {inject_env, fake_home, NULL}, *dir;
    char *out = NULL;
    int rc = run_prog("tests/integration/cupti_inject", "full", 0, env, &dir, &out);
    ck_assert_msg(rc == 0 && warnings(out) == 0, "exit %d:\n%s", rc, out);
    long leak_off = field(out, "leak_fn_offset=");
    uint64_t pair = (uint64_t)field(out, "vmm_pair="), kept = (uint64_t)field(out, "vmm_kept=");
    logv_t *l = read_log(dir);
    ck_assert_msg(!strcmp(l->mode, "injection"), "mode '%s'", l->mode);
    int observed = GMLOG_KIND_OBSERVED;
    /* 3 leaked, the runtime's, the library's, device 1, async, managed, pitch, 3 mappings. */
    ck_assert_msg(count_kind(l, observed, 0) == 12, "%d observed allocations", count_kind(l, observed, 0));
    ck_assert_msg(count_kind(l, observed, 1) == 7, "%d observed allocations freed", count_kind(l, observed, 1));
    ck_assert_msg(count_allocs(l, observed, 64 * MiB, "cupti_inject") == 3, "the 3 leaks, from the program");
    ck_assert_msg(count_allocs(l, observed, 8 * MiB, "libfakeblas.so") == 1, "the library's workspace");
    ck_assert_msg(count_allocs(l, observed, 1024 * 10, "cupti_inject") == 1, "the pitched one (pitch x height)");
    ck_assert_msg(count_allocs(l, GMLOG_KIND_HOST, 4096, NULL) == 1 && count_kind(l, GMLOG_KIND_HOST, 1) == 1,
                  "pinned host memory, allocated and freed");
    ck_assert_msg(count_kind(l, GMLOG_KIND_PASS, 1) == 1 && count_kind(l, GMLOG_KIND_POOL, 0) == 0,
                  "a call through the hooks in injection mode: %d pass-through, %d pooled",
                  count_kind(l, GMLOG_KIND_PASS, 1), count_kind(l, GMLOG_KIND_POOL, 0));
    int leaked = 0, at_fn = 0, dev1 = 0, vmm_pair = 0, vmm_kept = 0;
    uint64_t leaked_bytes = 0;
    for (int i = 0; i < l->nalloc; i++) {
        const l_alloc_t *a = &l->alloc[i];
        dev1 += a->dev == 1 && a->size == 2 * MiB && a->freed;
        vmm_pair += (a->ptr == pair || a->ptr == pair + 2 * MiB) && a->size == 2 * MiB && a->freed;
        vmm_kept += a->ptr == kept && !a->freed && !strcmp(log_string(l, a->lib), "libfakeblas.so");
        if (a->kind != observed || a->size != 64 * MiB || a->freed)
            continue;
        leaked++;
        leaked_bytes += a->size;
        /* The call site reaches the function that leaked. */
        for (int s = 0; s < l->nsite; s++) {
            if (l->site[s].id != a->site)
                continue;
            for (int f = 0; f < l->site[s].n; f++) {
                uint32_t mod = GMLOG_FRAME_MODULE(l->site[s].f[f]);
                uint64_t off = GMLOG_FRAME_OFFSET(l->site[s].f[f]);
                for (int m = 0; m < l->nmod; m++)
                    at_fn += l->mod[m].id == mod && strstr(l->mod[m].path, "cupti_inject") &&
                             off > (uint64_t)leak_off && off < (uint64_t)leak_off + 0x100;
            }
        }
    }
    ck_assert_msg(leaked == 3 && leaked_bytes == 192 * MiB, "%d leaked, %llu bytes", leaked,
                  (unsigned long long)leaked_bytes);
    ck_assert_msg(at_fn == 3, "%d of the leaks have cupti_leak_here (+0x%lx) in their stack", at_fn, leak_off);
    ck_assert_msg(dev1 == 1, "the device-1 allocation is on device 1");
    ck_assert_msg(vmm_pair == 2, "two mappings, both freed by one cuMemUnmap of the range (%d)", vmm_pair);
    ck_assert_msg(vmm_kept == 1, "the library's mapping stays live, named after the library");
    ck_assert_msg(l->noom == 2, "%d OOM records", l->noom);
    ck_assert_msg(l->oom[0].request == 1ull << 50 && l->oom[0].driver_total == 1ull << 30 &&
                  l->oom[0].driver_free > 0 && l->oom[0].driver_free < l->oom[0].driver_total,
                  "OOM: request %llu, driver %llu of %llu", (unsigned long long)l->oom[0].request,
                  (unsigned long long)l->oom[0].driver_free, (unsigned long long)l->oom[0].driver_total);
    ck_assert_msg(l->devrec[0] == 1 && l->devrec[1] == 1, "one DEVICE record per device: %d %d", l->devrec[0],
                  l->devrec[1]);
    free(l);
    free(out);
}
END_TEST

/* A soft failure: exit 0, exactly one warning containing `want`, nothing observed. */
static void expect_soft_failure(const char *prog, const char *arg, int preload, const char *const *env,
                                const char *want)
{
    const char *dir;
    char *out = NULL;
    int rc = run_prog(prog, arg, preload, env, &dir, &out);
    ck_assert_msg(rc == 0, "%s exited %d:\n%s", prog, rc, out);
    ck_assert_msg(warnings(out) == 1 && strstr(out, want), "one warning with '%s' expected:\n%s", want, out);
    logv_t *l = read_log(dir);
    ck_assert_msg(count_kind(l, GMLOG_KIND_OBSERVED, 0) == 0 && count_kind(l, GMLOG_KIND_FOREIGN, 0) == 0,
                  "allocations observed without CUPTI");
    free(l);
    free(out);
}

START_TEST(test_injection_without_libcupti_warns_once_and_runs)
{
    paths();
    const char *env[] = {inject_env, "CUDA_HOME=/nonexistent", "GMSHIM_TEST_CUPTI_NO_SYSTEM=1", NULL};
    expect_soft_failure("tests/integration/cupti_inject", "plain", 0, env, "no libcupti found");
}
END_TEST

START_TEST(test_injection_with_cupti_taken_warns_once_and_runs)
{
    paths();
    const char *env[] = {inject_env, fake_home, "FAKE_CUPTI_BUSY=Nsight Systems", NULL};
    expect_soft_failure("tests/integration/cupti_inject", "plain", 0, env, "CUPTI is taken by Nsight Systems");
}
END_TEST

START_TEST(test_unusable_cupti_warns_once_and_runs)
{
    paths();
    const char *env[] = {inject_env, fake_home, "FAKE_CUPTI_FAIL=15", NULL};
    expect_soft_failure("tests/integration/cupti_inject", "plain", 0, env, "CUPTI_ERROR_NOT_INITIALIZED");
}
END_TEST

/* ---- preload + GMSHIM_CUPTI=1 --------------------------------------------------------------- */

START_TEST(test_preload_logs_foreign_allocations_not_the_pools_own)
{
    paths();
    const char *env[] = {fake_home, "GMSHIM_CUPTI=1", NULL}, *dir;
    char *out = NULL;
    int rc = run_prog("tests/integration/cupti_foreign", "full", 1, env, &dir, &out);
    ck_assert_msg(rc == 0 && warnings(out) == 0, "exit %d:\n%s", rc, out);
    logv_t *l = read_log(dir);
    int foreign = GMLOG_KIND_FOREIGN;
    ck_assert_msg(!strcmp(l->mode, "preload"), "mode '%s'", l->mode);
    ck_assert_msg(count_kind(l, GMLOG_KIND_POOL, 0) == 4 && l->nseg >= 2,
                  "%d pooled allocations, %d segments", count_kind(l, GMLOG_KIND_POOL, 0), l->nseg);
    ck_assert_msg(count_kind(l, foreign, 0) == 5, "%d foreign allocations, expected the 5 made outside the hooks",
                  count_kind(l, foreign, 0));
    ck_assert_msg(count_allocs(l, foreign, 8 * MiB, "libfakeblas.so") == 1 &&
                  count_allocs(l, foreign, 4 * MiB, "libfakeblas.so") == 1 &&
                  count_allocs(l, foreign, 2 * MiB, "libfakeblas.so") == 2 &&
                  count_allocs(l, foreign, 3 * MiB, "cupti_foreign") == 1,
                  "each named after the library that asked");
    for (int i = 0; i < l->nalloc; i++)
        for (int s = 0; s < l->nseg; s++)
            ck_assert_msg(l->alloc[i].kind == GMLOG_KIND_POOL || l->alloc[i].ptr != l->seg[s],
                          "segment 0x%llx logged twice", (unsigned long long)l->seg[s]);
    /* The program's cuMemFree, the hooked cudaFree of a library's pointer, the cuMemUnmap. */
    ck_assert_msg(count_kind(l, foreign, 1) == 3, "%d foreign frees", count_kind(l, foreign, 1));
    ck_assert_msg(l->noom == 1 && l->oom[0].request == 1ull << 50, "%d OOM records", l->noom);
    ck_assert_msg(l->devrec[0] <= 1, "DEVICE written twice");
    free(l);
    free(out);
}
END_TEST

START_TEST(test_preload_threads_pair_every_foreign_allocation)
{
    paths();
    const char *env[] = {fake_home, "GMSHIM_CUPTI=1", NULL}, *dir;
    char *out = NULL;
    int rc = run_prog("tests/integration/cupti_foreign", "threads", 1, env, &dir, &out);
    ck_assert_msg(rc == 0 && warnings(out) == 0, "exit %d:\n%s", rc, out);
    logv_t *l = read_log(dir);
    int foreign = GMLOG_KIND_FOREIGN;
    ck_assert_msg(count_kind(l, foreign, 0) == 1601 && count_kind(l, foreign, 1) == 1601 &&
                  count_allocs(l, foreign, MiB, "libfakeblas.so") == 1601,
                  "%d foreign allocations, %d freed", count_kind(l, foreign, 0), count_kind(l, foreign, 1));
    ck_assert_msg(count_kind(l, GMLOG_KIND_POOL, 0) == 1604, "%d pooled", count_kind(l, GMLOG_KIND_POOL, 0));
    free(l);
    free(out);
}
END_TEST

START_TEST(test_preload_without_libcupti_warns_once_and_runs)
{
    const char *env[] = {"GMSHIM_CUPTI=1", "CUDA_HOME=/nonexistent", "GMSHIM_TEST_CUPTI_NO_SYSTEM=1", NULL};
    expect_soft_failure("tests/integration/cupti_foreign", "plain", 1, env, "bypass cudaMalloc");
}
END_TEST

START_TEST(test_preload_with_cupti_taken_warns_once_and_runs)
{
    paths();
    const char *env[] = {fake_home, "GMSHIM_CUPTI=1", "FAKE_CUPTI_BUSY=ncu", NULL};
    expect_soft_failure("tests/integration/cupti_foreign", "plain", 1, env, "taken by ncu");
}
END_TEST

START_TEST(test_preload_leaves_cupti_alone_by_default)
{
    paths();
    const char *env[] = {fake_home, NULL}, *dir;
    char *out = NULL;
    int rc = run_prog("tests/integration/cupti_foreign", "plain", 1, env, &dir, &out);
    ck_assert_msg(rc == 0 && warnings(out) == 0, "exit %d:\n%s", rc, out);
    ck_assert_msg(field(out, "segment_callbacks=") == 0, "subscribed without GMSHIM_CUPTI:\n%s", out);
    free(out);
}
END_TEST

Suite *cupti_suite(void)
{
    Suite *s = suite_create("cupti");
    TCase *tc = tcase_create("find");
    tcase_add_test(tc, test_candidates_follow_the_documented_order);
    tcase_add_test(tc, test_found_through_the_torch_wheel);
    tcase_add_test(tc, test_found_through_cuda_home);
    tcase_add_test(tc, test_a_cupti_in_a_group_writable_directory_is_not_loaded);
    tcase_add_test(tc, test_an_already_loaded_cupti_is_used_first);
    tcase_add_test(tc, test_no_log_no_subscription);
    suite_add_tcase(s, tc);
    tc = tcase_create("observe");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_injection_logs_every_driver_allocation_as_observed);
    tcase_add_test(tc, test_injection_without_libcupti_warns_once_and_runs);
    tcase_add_test(tc, test_injection_with_cupti_taken_warns_once_and_runs);
    tcase_add_test(tc, test_unusable_cupti_warns_once_and_runs);
    tcase_add_test(tc, test_preload_logs_foreign_allocations_not_the_pools_own);
    tcase_add_test(tc, test_preload_threads_pair_every_foreign_allocation);
    tcase_add_test(tc, test_preload_without_libcupti_warns_once_and_runs);
    tcase_add_test(tc, test_preload_with_cupti_taken_warns_once_and_runs);
    tcase_add_test(tc, test_preload_leaves_cupti_alone_by_default);
    suite_add_tcase(s, tc);
    return s;
}
