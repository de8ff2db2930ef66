/* Unit tests of the analyzer's log reader (analyzer/reader.c): logs written by the shim under
 * the preload read back record by record, the GMSHIM_LOG path rules the writer must follow, a
 * log of a killed process, and damaged files built byte by byte (each a clear diagnostic with
 * its offset, never a crash). */
#include "reader.h"
#include "suites.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
    size_t got = buf ? fread(buf, 1, (size_t)n, f) : 0;
    fclose(f);
    *len = got;
    return buf;
}

/* Runs an integration program under the preload, writing its log to `log`; returns its output. */
static char *record(const char *prog, const char *log, const char *extra_env)
{
    char logenv[4200], path[4096];
    snprintf(logenv, sizeof logenv, "GMSHIM_LOG=%s", log);
    snprintf(path, sizeof path, "%s", build_path(prog));
    const char *argv[] = {path, NULL};
    const char *env[] = {logenv, "FAKECUDA_MEM=1G", extra_env, NULL};
    char *out = NULL;
    int rc = run_program(argv, env, 1, &out);
    ck_assert_msg(rc == 0, "%s exited %d:\n%s", prog, rc, out);
    return out;
}

/* A fresh log of tests/integration/log_roundtrip, in memory. */
static uint8_t *roundtrip_log(size_t *len, char *dir_out, size_t dlen)
{
    const char *dir = temp_dir();
    char log[512];
    snprintf(log, sizeof log, "%s/rt.gmlog", dir);
    free(record("tests/integration/log_roundtrip", log, NULL));
    if (dir_out)
        snprintf(dir_out, dlen, "%s", dir);
    uint8_t *data = slurp(log, len);
    ck_assert_msg(data && *len > 4096, "no log at %s (%zu bytes)", log, data ? *len : 0);
    return data;
}

typedef struct counts {
    unsigned by_type[GMLOG_TYPE_MAX + 1];
    unsigned records;
    int monotonic;
} counts_t;

static counts_t count_records(rd_log_t *lf)
{
    counts_t c = {{0}, 0, 1};
    rd_rec_t r;
    uint64_t last = 0;
    while (rd_next(lf, &r)) {
        c.records++;
        if (r.type <= GMLOG_TYPE_MAX)
            c.by_type[r.type]++;
        if (r.t < last)
            c.monotonic = 0;
        last = r.t;
    }
    return c;
}

START_TEST(test_roundtrip_log_reads_back_every_call)
{
    size_t len;
    uint8_t *data = roundtrip_log(&len, NULL, 0);
    rd_log_t lf;
    int rc = rd_open_mem(&lf, data, len, "rt");
    ck_assert_msg(rc == 0, "open failed: %s", lf.diags[0].msg);
    ck_assert_msg(!lf.partial && lf.ndiags == 0, "a clean log reads as partial (%zu diags: %s)", lf.ndiags,
                  lf.ndiags ? lf.diags[0].msg : "");
    ck_assert_msg(lf.hdr.flags & GMLOG_F_CLOSED, "a clean exit leaves the log unclosed (flags %u)", lf.hdr.flags);
    ck_assert_msg(lf.nstreams >= 2, "two threads allocated, %zu streams found", lf.nstreams);
    counts_t c = count_records(&lf);
    ck_assert_msg(c.by_type[GMLOG_ALLOC] == 15, "15 allocations made, %u alloc records", c.by_type[GMLOG_ALLOC]);
    ck_assert_msg(c.by_type[GMLOG_FREE] == 10, "10 frees made, %u free records", c.by_type[GMLOG_FREE]);
    ck_assert_msg(c.by_type[GMLOG_MARK] == 2, "2 marks made, %u mark records", c.by_type[GMLOG_MARK]);
    ck_assert_msg(c.by_type[GMLOG_DEVICE] == 1, "%u device records", c.by_type[GMLOG_DEVICE]);
    ck_assert_msg(c.by_type[GMLOG_END] == 1, "%u end records", c.by_type[GMLOG_END]);
    ck_assert_msg(c.by_type[GMLOG_SITE] >= 2, "%u site records for two call sites", c.by_type[GMLOG_SITE]);
    ck_assert_msg(c.monotonic, "records do not come out in time order");
    const char *prog = rd_meta_get(&lf, GMLOG_META_PROGRAM);
    ck_assert_msg(prog && strstr(prog, "log_roundtrip"), "program metadata: %s", prog ? prog : "(none)");
    rd_close(&lf);
    free(data);
}
END_TEST

START_TEST(test_threads_merge_by_time_and_marks_keep_their_order)
{
    size_t len;
    uint8_t *data = roundtrip_log(&len, NULL, 0);
    rd_log_t lf;
    ck_assert_int_eq(rd_open_mem(&lf, data, len, "rt"), 0);
    rd_rec_t r;
    uint32_t main_tid = 0;
    int marks = 0, worker_allocs_before_marks = 0, worker_allocs = 0;
    char labels[2][16] = {"", ""};
    while (rd_next(&lf, &r)) {
        if (r.type == GMLOG_ALLOC && !main_tid)
            main_tid = r.tid;
        if (r.type == GMLOG_MARK && marks < 2) {
            const gmlog_mark_t *m = (const gmlog_mark_t *)r.p;
            const char *l;
            ck_assert_int_eq(rd_tail_bytes(&r, sizeof *m, m->len, &l), 0);
            snprintf(labels[marks], sizeof labels[0], "%.*s", (int)m->len, l);
            marks++;
        }
        if (r.type == GMLOG_ALLOC && r.tid != main_tid) {
            worker_allocs++;
            if (marks < 2)
                worker_allocs_before_marks++;
        }
    }
    ck_assert_msg(!strcmp(labels[0], "first") && !strcmp(labels[1], "second"), "marks read as '%s', '%s'",
                  labels[0], labels[1]);
    ck_assert_msg(worker_allocs == 4, "the worker thread made 4 allocations, %d read", worker_allocs);
    ck_assert_msg(worker_allocs_before_marks == 0, "%d worker allocations sorted before the marks that preceded "
                  "the thread", worker_allocs_before_marks);
    rd_rewind(&lf);
    counts_t c = count_records(&lf);
    ck_assert_msg(c.by_type[GMLOG_ALLOC] == 15, "a second pass reads %u allocs", c.by_type[GMLOG_ALLOC]);
    rd_close(&lf);
    free(data);
}
END_TEST

START_TEST(test_log_path_expands_rank_and_pid)
{
    const char *dir = temp_dir();
    char tmpl[512];
    snprintf(tmpl, sizeof tmpl, "%s/rank%%r-%%p.gmlog", dir);
    char *out = record("tests/integration/log_roundtrip", tmpl, "RANK=3");
    int pid = 0;
    const char *p = strstr(out, "pid=");
    ck_assert_msg(p && sscanf(p, "pid=%d", &pid) == 1, "no pid in the output:\n%s", out);
    char want[600];
    snprintf(want, sizeof want, "%s/rank3-%d.gmlog", dir, pid);
    struct stat st;
    ck_assert_msg(stat(want, &st) == 0, "GMSHIM_LOG=%s with RANK=3 did not write %s", tmpl, want);
    rd_log_t lf;
    ck_assert_msg(rd_open_path(&lf, want) == 0, "%s: %s", want, lf.diags[0].msg);
    const char *rank = rd_meta_keyed(&lf, GMLOG_META_RANK, "RANK");
    ck_assert_msg(rank && !strcmp(rank, "3"), "RANK metadata %s", rank ? rank : "(none)");
    ck_assert_msg(lf.hdr.pid == (uint32_t)pid, "header pid %u, program pid %d", lf.hdr.pid, pid);
    rd_close(&lf);
    free(out);
}
END_TEST

START_TEST(test_existing_log_is_never_overwritten)
{
    const char *dir = temp_dir();
    char log[512], second[520];
    snprintf(log, sizeof log, "%s/x.gmlog", dir);
    snprintf(second, sizeof second, "%s.1", log);
    FILE *f = fopen(log, "w");
    ck_assert_msg(f != NULL, "cannot create %s", log);
    fputs("keep me", f);
    fclose(f);
    free(record("tests/integration/log_roundtrip", log, NULL));
    size_t len;
    uint8_t *old = slurp(log, &len);
    ck_assert_msg(old && len == 7 && !memcmp(old, "keep me", 7), "the existing %s was overwritten (%zu bytes)", log, len);
    free(old);
    rd_log_t lf;
    ck_assert_msg(rd_open_path(&lf, second) == 0, "the log did not go to %s: %s", second, lf.diags[0].msg);
    rd_close(&lf);
}
END_TEST

START_TEST(test_killed_process_leaves_a_readable_unclosed_log)
{
    const char *dir = temp_dir();
    char log[512];
    snprintf(log, sizeof log, "%s/killed.gmlog", dir);
    int pfd[2];
    ck_assert_int_eq(pipe(pfd), 0);
    pid_t pid = fork();
    ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        dup2(pfd[1], 1);
        close(pfd[0]);
        close(pfd[1]);
        char pre[8192];
        const char *san = getenv("GMSHIM_TEST_PRELOAD");
        snprintf(pre, sizeof pre, "%s%s%s", san && *san ? san : "", san && *san ? " " : "", build_path("libgmshim.so"));
        setenv("LD_PRELOAD", pre, 1);
        setenv("GMSHIM_LOG", log, 1);
        setenv("FAKECUDA_MEM", "1G", 1);
        const char *prog = build_path("tests/integration/alloc_until_killed");
        execl(prog, prog, (char *)NULL);
        _exit(127);
    }
    close(pfd[1]);
    char buf[256] = "";
    size_t got = 0;
    while (got < sizeof buf - 1 && !strchr(buf, '\n')) {
        ssize_t n = read(pfd[0], buf + got, sizeof buf - 1 - got);
        if (n <= 0)
            break;
        got += (size_t)n;
        buf[got] = 0;
    }
    close(pfd[0]);
    unsigned long ready = 0;
    int ok = sscanf(buf, "ready %lu", &ready) == 1;
    kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);
    ck_assert_msg(ok, "the program never said it was ready: '%s'", buf);
    ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "not killed (status 0x%x)", status);
    rd_log_t lf;
    int rc = rd_open_path(&lf, log);
    ck_assert_msg(rc == 0, "the killed log does not open: %s", lf.diags[0].msg);
    ck_assert_msg(!(lf.hdr.flags & GMLOG_F_CLOSED), "a SIGKILLed log reads as closed");
    counts_t c = count_records(&lf);
    ck_assert_msg(!lf.partial, "a killed log reads as damaged: %s", lf.ndiags ? lf.diags[0].msg : "");
    ck_assert_msg(c.by_type[GMLOG_ALLOC] >= ready && c.by_type[GMLOG_FREE] >= ready,
                  "%lu pairs were done before 'ready', the log has %u allocs and %u frees", ready,
                  c.by_type[GMLOG_ALLOC], c.by_type[GMLOG_FREE]);
    rd_close(&lf);
    /* The CLI calls it normal input: exit 0, and says it was not closed. */
    char *out = NULL;
    const char *argv[] = {build_path("gmshim"), "summary", log, NULL};
    int st = run_program(argv, NULL, 0, &out);
    ck_assert_msg(st == 0, "gmshim summary of a killed log exited %d:\n%s", st, out);
    ck_assert_msg(strstr(out, "not closed"), "the summary does not say the log was not closed:\n%s", out);
    free(out);
    unlink(log); /* 16 MiB of preallocated chunks */
}
END_TEST

/* ---- damaged files, in memory ------------------------------------------------------------------ */

static rd_log_t lf_damaged;

static int open_bytes(const uint8_t *d, size_t n)
{
    return rd_open_mem(&lf_damaged, d, n, "damaged");
}

static int has_diag(const rd_log_t *lf, const char *what, uint64_t *offset)
{
    for (size_t i = 0; i < lf->ndiags && i < RD_MAX_DIAGS; i++)
        if (strstr(lf->diags[i].msg, what)) {
            if (offset)
                *offset = lf->diags[i].offset;
            return 1;
        }
    return 0;
}

START_TEST(test_foreign_and_empty_files_are_refused)
{
    static const uint8_t hello[] = "hello, world\n";
    ck_assert_int_eq(open_bytes(hello, sizeof hello - 1), -1);
    ck_assert_msg(lf_damaged.fatal && strstr(lf_damaged.diags[0].msg, "not a gmshim log"), "foreign file: %s",
                  lf_damaged.diags[0].msg);
    rd_close(&lf_damaged);
    ck_assert_int_eq(open_bytes(hello, 0), -1);
    ck_assert_msg(strstr(lf_damaged.diags[0].msg, "empty"), "empty file: %s", lf_damaged.diags[0].msg);
    rd_close(&lf_damaged);
}
END_TEST

START_TEST(test_truncated_header_is_refused_with_its_offset)
{
    size_t len;
    uint8_t *data = roundtrip_log(&len, NULL, 0);
    ck_assert_int_eq(open_bytes(data, 50), -1);
    ck_assert_msg(strstr(lf_damaged.diags[0].msg, "truncated header") && lf_damaged.diags[0].offset == 50,
                  "50 bytes: '%s' at %llu", lf_damaged.diags[0].msg, (unsigned long long)lf_damaged.diags[0].offset);
    rd_close(&lf_damaged);
    ck_assert_int_eq(open_bytes(data, 2000), -1);
    ck_assert_msg(strstr(lf_damaged.diags[0].msg, "truncated header"), "2000 bytes: %s", lf_damaged.diags[0].msg);
    rd_close(&lf_damaged);
    ck_assert_int_eq(open_bytes(data, 5), -1); /* a prefix of the magic is still a log, cut short */
    ck_assert_msg(strstr(lf_damaged.diags[0].msg, "truncated header"), "5 bytes: %s", lf_damaged.diags[0].msg);
    rd_close(&lf_damaged);
    free(data);
}
END_TEST

START_TEST(test_newer_format_version_is_refused)
{
    size_t len;
    uint8_t *data = roundtrip_log(&len, NULL, 0);
    uint32_t v = 2;
    memcpy(data + 8, &v, 4);
    ck_assert_int_eq(open_bytes(data, len), -1);
    ck_assert_msg(!strcmp(lf_damaged.diags[0].msg,
                          "log format version 2 is newer than this gmshim reads (1); upgrade gmshim"),
                  "version 2: %s", lf_damaged.diags[0].msg);
    rd_close(&lf_damaged);
    free(data);
}
END_TEST

START_TEST(test_bad_byte_order_and_chunk_size_are_refused)
{
    size_t len;
    uint8_t *data = roundtrip_log(&len, NULL, 0);
    uint8_t save[4];
    memcpy(save, data + 12, 4);
    memset(data + 12, 0x55, 4);
    ck_assert_int_eq(open_bytes(data, len), -1);
    ck_assert_msg(strstr(lf_damaged.diags[0].msg, "byte-order") && lf_damaged.diags[0].offset == 12, "%s",
                  lf_damaged.diags[0].msg);
    rd_close(&lf_damaged);
    memcpy(data + 12, save, 4);
    uint32_t cs = 100;
    memcpy(data + 20, &cs, 4);
    ck_assert_int_eq(open_bytes(data, len), -1);
    ck_assert_msg(strstr(lf_damaged.diags[0].msg, "chunk size"), "%s", lf_damaged.diags[0].msg);
    rd_close(&lf_damaged);
    free(data);
}
END_TEST

START_TEST(test_truncated_chunk_reads_what_is_there_and_is_partial)
{
    size_t len;
    uint8_t *data = roundtrip_log(&len, NULL, 0);
    rd_log_t full;
    ck_assert_int_eq(rd_open_mem(&full, data, len, "full"), 0);
    counts_t all = count_records(&full);
    uint32_t hs = full.hdr.header_size;
    rd_close(&full);
    size_t cut = hs + 2000;
    ck_assert_msg(open_bytes(data, cut) == 0, "a log cut inside a chunk is refused: %s", lf_damaged.diags[0].msg);
    counts_t c = count_records(&lf_damaged);
    uint64_t off = 0;
    ck_assert_msg(lf_damaged.partial && lf_damaged.truncated, "cut at %zu: not flagged partial", cut);
    ck_assert_msg(has_diag(&lf_damaged, "cut short", &off) && off == cut, "no diagnostic at byte %zu (got %llu)", cut,
                  (unsigned long long)off);
    ck_assert_msg(c.records > 0 && c.records < all.records, "read %u of %u records before the cut", c.records, all.records);
    rd_close(&lf_damaged);
    free(data);
}
END_TEST

START_TEST(test_flipped_chunk_magic_skips_that_chunk_only)
{
    size_t len;
    uint8_t *data = roundtrip_log(&len, NULL, 0);
    uint32_t hs;
    memcpy(&hs, data + 16, 4);
    data[hs] ^= 0x40;
    ck_assert_int_eq(open_bytes(data, len), 0);
    uint64_t off = 0;
    ck_assert_msg(lf_damaged.partial && has_diag(&lf_damaged, "bad magic", &off) && off == hs,
                  "a damaged chunk magic at %u: partial %d, %zu diags", hs, lf_damaged.partial, lf_damaged.ndiags);
    rd_close(&lf_damaged);
    free(data);
}
END_TEST

/* Offset of the n-th record of type `type` in the log (in file order within its chunk). */
static size_t find_record(const uint8_t *data, size_t len, unsigned type, unsigned nth)
{
    rd_log_t lf;
    size_t at = 0;
    if (rd_open_mem(&lf, data, len, "find") == 0) {
        rd_rec_t r;
        unsigned seen = 0;
        while (rd_next(&lf, &r))
            if (r.type == type && seen++ == nth) {
                at = (size_t)r.off;
                break;
            }
    }
    rd_close(&lf);
    return at;
}

START_TEST(test_damaged_records_are_reported_and_the_rest_is_read)
{
    size_t len;
    uint8_t *data = roundtrip_log(&len, NULL, 0);
    size_t at = find_record(data, len, GMLOG_FREE, 2);
    ck_assert_msg(at > 0, "no third free record");
    uint8_t save = data[at + 1];
    /* length 0: the rest of the chunk cannot be walked */
    data[at + 1] = 0;
    ck_assert_int_eq(open_bytes(data, len), 0);
    counts_t c = count_records(&lf_damaged);
    uint64_t off = 0;
    ck_assert_msg(lf_damaged.partial && has_diag(&lf_damaged, "length 0", &off) && off == at,
                  "zero length at %zu: partial %d, diag at %llu", at, lf_damaged.partial, (unsigned long long)off);
    ck_assert_msg(c.by_type[GMLOG_FREE] >= 2, "the records before the damage were lost (%u frees)", c.by_type[GMLOG_FREE]);
    rd_close(&lf_damaged);
    /* shorter than its layout: skipped, the next ones still read */
    data[at + 1] = 1;
    ck_assert_int_eq(open_bytes(data, len), 0);
    c = count_records(&lf_damaged);
    ck_assert_msg(has_diag(&lf_damaged, "shorter than its layout", NULL), "an 8-byte free record was accepted");
    rd_close(&lf_damaged);
    /* an unknown type with a sound length is skipped quietly (a newer writer's record) */
    data[at + 1] = save;
    data[at] = 99;
    ck_assert_int_eq(open_bytes(data, len), 0);
    c = count_records(&lf_damaged);
    ck_assert_msg(!lf_damaged.partial && lf_damaged.unknown_records == 1 && c.by_type[GMLOG_FREE] == 9,
                  "unknown type: partial %d, %llu unknown, %u frees", lf_damaged.partial,
                  (unsigned long long)lf_damaged.unknown_records, c.by_type[GMLOG_FREE]);
    rd_close(&lf_damaged);
    free(data);
}
END_TEST

START_TEST(test_record_running_past_its_chunk_is_reported)
{
    size_t len = 4096 + 65536;
    uint8_t *d = calloc(1, len);
    gmlog_file_header_t h = {.version = 1, .byte_order = GMLOG_BYTE_ORDER, .header_size = 4096,
                             .chunk_size = 65536, .pid = 1};
    memcpy(h.magic, GMLOG_MAGIC, 8);
    memcpy(d, &h, sizeof h);
    gmlog_chunk_header_t ch = {.magic = GMLOG_CHUNK_MAGIC, .tid = 9};
    memcpy(d + 4096, &ch, sizeof ch);
    size_t at = 4096 + 65536 - 16;
    gmlog_rec_t r = {GMLOG_ALLOC, 4, 0, 0, 1};
    memcpy(d + 4096 + 32, &r, sizeof r); /* a first record whose length leads to the last 16 bytes */
    d[4096 + 32 + 1] = (uint8_t)((at - 4096 - 32) / 8 > 255 ? 255 : (at - 4096 - 32) / 8);
    ck_assert_int_eq(open_bytes(d, len), 0);
    count_records(&lf_damaged);
    ck_assert_msg(!lf_damaged.partial, "a long record inside its chunk is fine");
    rd_close(&lf_damaged);
    /* now a record that starts 16 bytes before the end and says it has 32 */
    memset(d + 4096 + 32, 0, 8);
    memcpy(d + 4096 + 32, &r, sizeof r);
    d[4096 + 32 + 1] = 4;
    uint8_t filler[8] = {GMLOG_CLOCK, 2, GMLOG_NO_DEVICE, 0, 0, 0, 0, 0};
    for (size_t o = 4096 + 32 + 32; o + 16 <= at; o += 16)
        memcpy(d + o, filler, 8);
    memcpy(d + at, &r, sizeof r);
    ck_assert_int_eq(open_bytes(d, len), 0);
    count_records(&lf_damaged);
    uint64_t off = 0;
    ck_assert_msg(lf_damaged.partial && has_diag(&lf_damaged, "runs past the end", &off) && off == at,
                  "a record past its chunk at %zu: partial %d, diag at %llu", at, lf_damaged.partial,
                  (unsigned long long)off);
    rd_close(&lf_damaged);
    free(d);
}
END_TEST

START_TEST(test_corrupt_metadata_is_reported)
{
    size_t len;
    uint8_t *data = roundtrip_log(&len, NULL, 0);
    uint32_t huge = 0x7fffffff;
    memcpy(data + 96 + 4, &huge, 4); /* the first entry's length */
    ck_assert_int_eq(open_bytes(data, len), 0);
    uint64_t off = 0;
    ck_assert_msg(has_diag(&lf_damaged, "corrupt metadata", &off) && off == 96, "metadata: partial %d, diag at %llu",
                  lf_damaged.partial, (unsigned long long)off);
    counts_t c = count_records(&lf_damaged);
    ck_assert_msg(c.by_type[GMLOG_ALLOC] == 15, "records after damaged metadata: %u allocs", c.by_type[GMLOG_ALLOC]);
    rd_close(&lf_damaged);
    free(data);
}
END_TEST

/* A big-endian log built by hand: the reader swaps every field. */
static void put32be(uint8_t *p, uint32_t v) { v = __builtin_bswap32(v); memcpy(p, &v, 4); }
static void put64be(uint8_t *p, uint64_t v) { v = __builtin_bswap64(v); memcpy(p, &v, 8); }

START_TEST(test_byte_swapped_log_is_read_in_its_own_order)
{
    size_t len = 4096 + 65536;
    uint8_t *d = calloc(1, len);
    memcpy(d, GMLOG_MAGIC, 8);
    put32be(d + 8, 1);
    put32be(d + 12, GMLOG_BYTE_ORDER);
    put32be(d + 16, 4096);
    put32be(d + 20, 65536);
    put32be(d + 40, 77);
    uint8_t *c = d + 4096;
    put32be(c, GMLOG_CHUNK_MAGIC);
    put32be(c + 4, 5);
    put64be(c + 8, 0);
    put64be(c + 16, 1000);
    uint8_t *r = c + 32;
    r[0] = GMLOG_ALLOC, r[1] = 4, r[2] = 0, r[3] = GMLOG_A_MISS;
    put32be(r + 4, 25);
    put64be(r + 8, 0x7f0000001000ull);
    put64be(r + 16, 4096);
    put32be(r + 24, 7);
    ck_assert_int_eq(open_bytes(d, len), 0);
    ck_assert_msg(lf_damaged.swapped && lf_damaged.hdr.pid == 77, "swapped %d, pid %u", lf_damaged.swapped,
                  lf_damaged.hdr.pid);
    rd_rec_t rec;
    ck_assert_int_eq(rd_next(&lf_damaged, &rec), 1);
    const gmlog_alloc_t *a = (const gmlog_alloc_t *)rec.p;
    ck_assert_msg(rec.type == GMLOG_ALLOC && rec.t == 1025 && a->ptr == 0x7f0000001000ull && a->size == 4096 &&
                  a->site == 7, "type %u t %llu ptr %llx size %llu site %u", rec.type, (unsigned long long)rec.t,
                  (unsigned long long)a->ptr, (unsigned long long)a->size, a->site);
    ck_assert_int_eq(rd_next(&lf_damaged, &rec), 0);
    rd_close(&lf_damaged);
    free(d);
}
END_TEST

START_TEST(test_random_damage_never_crashes_the_reader)
{
    size_t len;
    uint8_t *data = roundtrip_log(&len, NULL, 0);
    uint8_t *copy = malloc(len);
    uint64_t x = 0x2545F4914F6CDD1Dull;
    for (int round = 0; round < 400; round++) {
        memcpy(copy, data, len);
        for (int k = 0; k < 1 + round % 16; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            size_t at = 4096 + (size_t)(x % (len - 4096));
            if (round % 5 == 0)
                at = (size_t)(x % 4096);
            copy[at] = (uint8_t)(x >> 24);
        }
        size_t n = round % 7 == 0 ? (size_t)(x % len) : len;
        rd_log_t lf;
        if (rd_open_mem(&lf, copy, n, "random") == 0)
            count_records(&lf);
        rd_close(&lf);
    }
    free(copy);
    free(data);
}
END_TEST

Suite *analyzer_reader_suite(void)
{
    Suite *s = suite_create("analyzer_reader");
    TCase *tc = tcase_create("logs");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_roundtrip_log_reads_back_every_call);
    tcase_add_test(tc, test_threads_merge_by_time_and_marks_keep_their_order);
    tcase_add_test(tc, test_log_path_expands_rank_and_pid);
    tcase_add_test(tc, test_existing_log_is_never_overwritten);
    tcase_add_test(tc, test_killed_process_leaves_a_readable_unclosed_log);
    suite_add_tcase(s, tc);
    TCase *dmg = tcase_create("damaged");
    tcase_set_timeout(dmg, 120);
    tcase_add_test(dmg, test_foreign_and_empty_files_are_refused);
    tcase_add_test(dmg, test_truncated_header_is_refused_with_its_offset);
    tcase_add_test(dmg, test_newer_format_version_is_refused);
    tcase_add_test(dmg, test_bad_byte_order_and_chunk_size_are_refused);
    tcase_add_test(dmg, test_truncated_chunk_reads_what_is_there_and_is_partial);
    tcase_add_test(dmg, test_flipped_chunk_magic_skips_that_chunk_only);
    tcase_add_test(dmg, test_damaged_records_are_reported_and_the_rest_is_read);
    tcase_add_test(dmg, test_record_running_past_its_chunk_is_reported);
    tcase_add_test(dmg, test_corrupt_metadata_is_reported);
    tcase_add_test(dmg, test_byte_swapped_log_is_read_in_its_own_order);
    tcase_add_test(dmg, test_random_damage_never_crashes_the_reader);
    suite_add_tcase(s, dmg);
    return s;
}
