/* Unit tests of the analyzer's log reader (analyzer/reader.c): logs written by the shim under
 * the preload read back record by record, the GMSHIM_LOG path rules the writer must follow, a
 * log of a killed process (also one killed before it recorded anything), and damaged files
 * built byte by byte (each a clear diagnostic with its offset, never a crash), cut ones too. */
#include "reader.h"
#include "suites.h"
#include "testlog.h"

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
    char env_log[600];
    snprintf(env_log, sizeof env_log, "GMSHIM_LOG=%s", log);
    const char *env[] = {env_log, "FAKECUDA_MEM=1G", NULL};
    int pfd[1];
    pid_t pid = spawn_preloaded("tests/integration/alloc_until_killed", env, &pfd[0]);
    ck_assert_msg(pid > 0, "cannot start the program: %s", strerror(errno));
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
    /* zeros are no header, but a log's header pages are a multiple of 4096 bytes */
    static uint8_t zeros[4097];
    ck_assert_int_eq(open_bytes(zeros, sizeof zeros), -1);
    ck_assert_msg(strstr(lf_damaged.diags[0].msg, "not a gmshim log"), "4097 zero bytes: %s", lf_damaged.diags[0].msg);
    rd_close(&lf_damaged);
}
END_TEST

/* What a kill in a process's first milliseconds leaves: an empty file, the header's pages still
 * zero (perhaps with the magic stored), or a header and no chunk (or only unused ones). */
START_TEST(test_a_log_killed_at_its_start_reads_as_an_empty_unclosed_run)
{
    size_t len;
    uint8_t *data = roundtrip_log(&len, NULL, 0);
    uint32_t hs;
    memcpy(&hs, data + 16, 4);
    size_t n = hs + 2 * GMLOG_CHUNK_SIZE;
    uint8_t *buf = calloc(1, n);
    struct { const char *what; size_t len; int magic, header, no_header; } cases[] = {
        {"an empty file", 0, 0, 0, 1},
        {"a zeroed header", 4096, 0, 0, 1},
        {"the magic, then zeros", 8192, 1, 0, 1},
        {"a header and no chunk", hs, 1, 1, 0},
        {"a header and two unused chunks", n, 1, 1, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memset(buf, 0, n);
        if (cases[i].magic)
            memcpy(buf, GMLOG_MAGIC, 8);
        if (cases[i].header) {
            memcpy(buf, data, hs);
            gmlog_file_header_t *h = (gmlog_file_header_t *)buf;
            h->flags = 0, h->end_ns = 0, h->close_reason = 0, h->chunks_at_close = 0;
        }
        int rc = open_bytes(buf, cases[i].len);
        ck_assert_msg(rc == 0, "%s is refused: %s", cases[i].what, lf_damaged.diags[0].msg);
        counts_t c = count_records(&lf_damaged);
        ck_assert_msg(!lf_damaged.partial && lf_damaged.ndiags == 0 && c.records == 0,
                      "%s: partial %d, %zu diags (%s), %u records", cases[i].what, lf_damaged.partial,
                      lf_damaged.ndiags, lf_damaged.ndiags ? lf_damaged.diags[0].msg : "", c.records);
        ck_assert_msg(!(lf_damaged.hdr.flags & GMLOG_F_CLOSED) && lf_damaged.no_header == cases[i].no_header,
                      "%s: flags %u, no_header %d", cases[i].what, lf_damaged.hdr.flags, lf_damaged.no_header);
        rd_close(&lf_damaged);
    }
    free(buf);
    free(data);
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

/* The writer records its chunk count at a clean close: a copy cut at a chunk boundary (it
 * reads as a whole file otherwise) says how many chunks it lacks. */
START_TEST(test_closed_log_cut_at_a_chunk_boundary_reads_as_truncated)
{
    size_t len;
    uint8_t *data = roundtrip_log(&len, NULL, 0);
    rd_log_t full;
    ck_assert_int_eq(rd_open_mem(&full, data, len, "full"), 0);
    uint32_t hs = full.hdr.header_size;
    uint64_t at_close = full.hdr.chunks_at_close;
    size_t slots = full.nslots;
    ck_assert_msg(!full.partial && at_close == slots && slots >= 2, "the writer's chunks_at_close %llu, %zu chunks in "
                  "the file (partial %d)", (unsigned long long)at_close, slots, full.partial);
    rd_close(&full);
    for (size_t k = 0; k < slots; k++) {
        size_t cut = hs + k * GMLOG_CHUNK_SIZE;
        char want[160];
        snprintf(want, sizeof want, "holds %zu of the %zu chunks the log was closed with: %zu chunk%s", k, slots,
                 slots - k, slots - k == 1 ? " is missing" : "s are missing");
        ck_assert_int_eq(open_bytes(data, cut), 0);
        count_records(&lf_damaged);
        uint64_t off = 0;
        ck_assert_msg(lf_damaged.partial && lf_damaged.truncated && has_diag(&lf_damaged, want, &off) && off == cut,
                      "cut at %zu (%zu chunks): partial %d, truncated %d, '%s' at %llu", cut, k, lf_damaged.partial,
                      lf_damaged.truncated, lf_damaged.ndiags ? lf_damaged.diags[0].msg : "",
                      (unsigned long long)off);
        rd_close(&lf_damaged);
    }
    free(data);
}
END_TEST

/* Without chunks_at_close (writers before it), a log closed at exit whose END record is gone
 * lost chunks at its end; one closed by a signal or not closed has none to lose. */
START_TEST(test_old_log_closed_at_exit_without_its_end_record_is_partial)
{
    size_t len;
    uint8_t *data = slurp("tests/fixtures/h200_torch_leak_oom.gmlog", &len);
    ck_assert_msg(data && len > 4096 + 6 * GMLOG_CHUNK_SIZE, "no fixture (%zu bytes)", data ? len : 0);
    gmlog_file_header_t *h = (gmlog_file_header_t *)data;
    ck_assert_msg(h->chunks_at_close == 0 && (h->flags & GMLOG_F_CLOSED) && h->close_reason == GMLOG_CLOSE_EXIT,
                  "the fixture is not an old log closed at exit");
    ck_assert_int_eq(open_bytes(data, len), 0);
    ck_assert_msg(!lf_damaged.partial, "the whole fixture reads as partial: %s", lf_damaged.diags[0].msg);
    rd_close(&lf_damaged);
    size_t cut = h->header_size + 5 * GMLOG_CHUNK_SIZE;
    ck_assert_int_eq(open_bytes(data, cut), 0);
    uint64_t off = 0;
    ck_assert_msg(lf_damaged.partial && has_diag(&lf_damaged, "closed at exit but its end record is missing", &off) &&
                  off == cut, "cut at %zu: partial %d, '%s' at %llu", cut, lf_damaged.partial,
                  lf_damaged.ndiags ? lf_damaged.diags[0].msg : "", (unsigned long long)off);
    rd_close(&lf_damaged);
    h->close_reason = GMLOG_CLOSE_SIGNAL | 9u << 8;
    ck_assert_int_eq(open_bytes(data, cut), 0);
    ck_assert_msg(!lf_damaged.partial, "closed by a signal, no END: %s", lf_damaged.diags[0].msg);
    rd_close(&lf_damaged);
    h->flags = 0;
    ck_assert_int_eq(open_bytes(data, cut), 0);
    ck_assert_msg(!lf_damaged.partial, "not closed, no END: %s", lf_damaged.diags[0].msg);
    rd_close(&lf_damaged);
    free(data);
}
END_TEST

/* A chunk beyond the count the writer closed with was not written by it. */
START_TEST(test_chunk_past_the_close_is_reported)
{
    size_t len;
    uint8_t *data = roundtrip_log(&len, NULL, 0);
    uint8_t *d = realloc(data, len + GMLOG_CHUNK_SIZE);
    ck_assert(d != NULL);
    memcpy(d + len, d + len - GMLOG_CHUNK_SIZE, GMLOG_CHUNK_SIZE);
    gmlog_chunk_header_t *ch = (gmlog_chunk_header_t *)(d + len);
    uint32_t hs;
    memcpy(&hs, d + 16, 4);
    ch->index = (len - hs) / GMLOG_CHUNK_SIZE;
    ch->thread_chunk++; /* the thread's numbering goes on: only the count tells */
    ck_assert_int_eq(open_bytes(d, len + GMLOG_CHUNK_SIZE), 0);
    uint64_t off = 0;
    ck_assert_msg(lf_damaged.partial && has_diag(&lf_damaged, "lies past the", &off) && off == len,
                  "an added chunk at %zu: partial %d, '%s'", len, lf_damaged.partial,
                  lf_damaged.ndiags ? lf_damaged.diags[0].msg : "");
    rd_close(&lf_damaged);
    free(d);
}
END_TEST

/* The model reports a record's problems after the reader handed it out, when the iteration may
 * already have ended: those are kept; a second pass repeats none, nor does the same one twice. */
START_TEST(test_diagnostics_after_the_last_record_are_kept_once)
{
    size_t len;
    uint8_t *data = roundtrip_log(&len, NULL, 0);
    ck_assert_int_eq(open_bytes(data, len), 0);
    counts_t c = count_records(&lf_damaged);
    ck_assert_msg(c.records > 0 && lf_damaged.ndiags == 0, "%u records, %zu diags", c.records, lf_damaged.ndiags);
    rd_diag(&lf_damaged, 4200, 1, "a problem of the last record");
    rd_diag(&lf_damaged, 4200, 1, "a problem of the last record");
    ck_assert_msg(lf_damaged.partial && lf_damaged.ndiags == 1 && !strcmp(lf_damaged.diags[0].msg,
                  "a problem of the last record"), "after the end: partial %d, %zu diags", lf_damaged.partial,
                  lf_damaged.ndiags);
    rd_rewind(&lf_damaged);
    count_records(&lf_damaged);
    rd_diag(&lf_damaged, 4200, 1, "a problem of the last record");
    ck_assert_msg(lf_damaged.ndiags == 1, "a second pass added %zu diags", lf_damaged.ndiags - 1);
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

/* ---- bounded logs: checkpoints (logs built by tests/unit/testlog.c) ------------------------------ */

#define MS 1000000ull

typedef struct want {
    uint8_t type, ckpt;
    uint64_t t;                /* UINT64_MAX: any */
} want_t;

/* Reads lf to its end, checking the records against want[0..n); returns how many there were. */
static unsigned read_expecting(rd_log_t *lf, const want_t *want, unsigned n, const char *what)
{
    rd_rec_t r;
    unsigned i = 0;
    while (rd_next(lf, &r)) {
        ck_assert_msg(i < n, "%s: record %u (type %u at %llu ns, ckpt %u) is one too many", what, i, r.type,
                      (unsigned long long)r.t, r.ckpt);
        ck_assert_msg(r.type == want[i].type && r.ckpt == want[i].ckpt && (want[i].t == UINT64_MAX || r.t == want[i].t),
                      "%s: record %u is type %u, ckpt %u at %llu ns; expected type %u, ckpt %u at %llu", what, i,
                      r.type, r.ckpt, (unsigned long long)r.t, want[i].type, want[i].ckpt,
                      (unsigned long long)want[i].t);
        i++;
    }
    return i;
}

/* The example's records after the checkpoint (testlog.h), all events. */
#define AFTER_CKPT                                                                                     \
    {GMLOG_ALLOC, RD_EVENT, 2000 * MS}, {GMLOG_FREE, RD_EVENT, 2010 * MS},                              \
    {GMLOG_SEGMENT_ALLOC, RD_EVENT, 2019 * MS}, {GMLOG_ALLOC, RD_EVENT, 2020 * MS},                      \
    {GMLOG_FREE, RD_EVENT, 2030 * MS}, {GMLOG_MARK, RD_EVENT, 2040 * MS}, {GMLOG_FREE, RD_EVENT, 2050 * MS}

/* Early chunks overwritten, a stale one left, gaps in the thread's numbering: the reader hands
 * out the checkpoint's definitions, its history at its own time, the device's cut and its
 * blocks at the cut's time, then only the events after the cut. */
START_TEST(test_a_wrapped_log_is_read_from_its_checkpoint)
{
    tlog_t b;
    tlog_wrapped_example(&b, 1, 1);
    rd_log_t lf;
    ck_assert_int_eq(rd_open_mem(&lf, b.buf, b.len, "wrapped"), 0);
    ck_assert_msg(!lf.partial && lf.ndiags == 0, "a sound wrapped log reads as damaged: %s",
                  lf.ndiags ? lf.diags[0].msg : "");
    ck_assert_msg(lf.wrapped && lf.ckpt.seq == 1 && lf.ckpt.at_ns == 1000 * MS && lf.ckpt.detail_from_ns == 1001 * MS &&
                  lf.ckpt.allocs == 15 && lf.ckpt.frees == 13 && lf.ckpt.cuts == 1,
                  "checkpoint: wrapped %d seq %llu at %llu detail from %llu, %llu allocs %llu frees, %u cuts", lf.wrapped,
                  (unsigned long long)lf.ckpt.seq, (unsigned long long)lf.ckpt.at_ns,
                  (unsigned long long)lf.ckpt.detail_from_ns, (unsigned long long)lf.ckpt.allocs,
                  (unsigned long long)lf.ckpt.frees, lf.ckpt.cuts);
    static const want_t want[] = {
        {GMLOG_DEVICE, RD_CKPT_DEF, UINT64_MAX}, {GMLOG_SITE, RD_CKPT_DEF, UINT64_MAX},
        {GMLOG_SITE, RD_CKPT_DEF, UINT64_MAX}, {GMLOG_SITE, RD_CKPT_DEF, UINT64_MAX},
        {GMLOG_OOM, RD_CKPT_HISTORY, 350 * MS}, {GMLOG_MARK, RD_CKPT_HISTORY, 400 * MS},
        {GMLOG_CUT, RD_CKPT_STATE, 1001 * MS},
        {GMLOG_SEGMENT_ALLOC, RD_CKPT_STATE, 1001 * MS}, {GMLOG_ALLOC, RD_CKPT_STATE, 1001 * MS},
        {GMLOG_ALLOC, RD_CKPT_STATE, 1001 * MS}, AFTER_CKPT};
    unsigned n = sizeof want / sizeof want[0];
    ck_assert_uint_eq(read_expecting(&lf, want, n, "first pass"), n);
    rd_rewind(&lf);
    ck_assert_uint_eq(read_expecting(&lf, want, n, "second pass"), n);
    /* a window after the cut has no prologue; one from the start has */
    rd_window(&lf, 2015 * MS, UINT64_MAX);
    rd_rewind(&lf);
    ck_assert_uint_eq(read_expecting(&lf, want + 12, n - 12, "window from 2.015 s"), n - 12);
    rd_window(&lf, 0, 2015 * MS);
    rd_rewind(&lf);
    ck_assert_uint_eq(read_expecting(&lf, want, 12, "window to 2.015 s"), 12);
    ck_assert_msg(!lf.partial, "reading windows made the log partial: %s", lf.ndiags ? lf.diags[0].msg : "");
    rd_close(&lf);
    /* written in the other byte order: the same records, the cut's figures in this order */
    tlog_swap(&b);
    ck_assert_int_eq(rd_open_mem(&lf, b.buf, b.len, "wrapped, swapped"), 0);
    ck_assert_msg(lf.swapped && !lf.partial && lf.ckpt.seq == 1 && lf.ckpt.allocs == 15 &&
                  lf.ckpt.detail_from_ns == 1001 * MS, "swapped: partial %d (%s), seq %llu, %llu allocs", lf.partial,
                  lf.ndiags ? lf.diags[0].msg : "", (unsigned long long)lf.ckpt.seq, (unsigned long long)lf.ckpt.allocs);
    rd_rec_t r;
    unsigned i = 0;
    while (rd_next(&lf, &r)) {
        ck_assert_msg(i < n && r.type == want[i].type && r.ckpt == want[i].ckpt &&
                      (want[i].t == UINT64_MAX || r.t == want[i].t), "swapped: record %u is type %u, ckpt %u at %llu",
                      i, r.type, r.ckpt, (unsigned long long)r.t);
        if (r.type == GMLOG_CUT)
            ck_assert_msg(((const gmlog_cut_t *)r.p)->peak_allocated == 81 * TLOG_MiB + TLOG_MiB / 2 &&
                          ((const gmlog_cut_t *)r.p)->blocks == 2, "swapped: the cut's figures read wrong");
        if (r.type == GMLOG_ALLOC && r.ckpt)
            ck_assert_msg(((const gmlog_alloc_t *)r.p)->ptr == (i == 8 ? TLOG_A : TLOG_D), "swapped: a cut block's pointer");
        i++;
    }
    ck_assert_uint_eq(i, n);
    rd_close(&lf);
    tlog_free_buf(&b);
}
END_TEST

/* The same run with every chunk there and no wrap: the checkpoint's records are skipped, all of
 * them, and the events are read as they are; a span inside a worker's records too, also when a
 * window starts inside it (then the reader says so: a parallel replay gives way). */
START_TEST(test_a_log_that_did_not_wrap_skips_its_checkpoints)
{
    tlog_t b;
    tlog_wrapped_example(&b, 0, 1);
    rd_log_t lf;
    ck_assert_int_eq(rd_open_mem(&lf, b.buf, b.len, "not wrapped"), 0);
    rd_rec_t r;
    unsigned n = 0, allocs = 0, marks = 0, ckpt = 0;
    while (rd_next(&lf, &r)) {
        n++;
        allocs += r.type == GMLOG_ALLOC;
        marks += r.type == GMLOG_MARK;
        ckpt += r.ckpt != RD_EVENT || r.type == GMLOG_CHECKPOINT || r.type == GMLOG_CUT || r.type == GMLOG_AT;
    }
    ck_assert_msg(n == 42 && allocs == 17 && marks == 2 && !ckpt && !lf.partial && !lf.wrapped && !lf.ckpt.seq,
                  "%u records, %u allocs, %u marks, %u of the checkpoint; partial %d (%s)", n, allocs, marks, ckpt,
                  lf.partial, lf.ndiags ? lf.diags[0].msg : "");
    rd_close(&lf);
    tlog_free_buf(&b);

    /* a worker writes a checkpoint between its events, across two of its chunks */
    tlog_begin(&b, 0);
    tlog_chunk(&b, 7, 0, 0, 0);
    tlog_alloc(&b, 10, TLOG_A, 4096, 0, 0);
    tlog_checkpoint(&b, 20, GMLOG_CKPT_BEGIN, 3, 20);
    tlog_site(&b, 21, 5);
    gmlog_cut_t cut = {.cut_ns = 22, .requested = 4096, .allocated = 4096, .allocs = 1, .blocks = 1};
    tlog_cut(&b, 22, &cut);
    tlog_chunk(&b, 7, 1, 1, 100);
    tlog_alloc(&b, 100, TLOG_A, 4096, 0, 0);
    tlog_checkpoint(&b, 110, GMLOG_CKPT_END, 3, 20);
    tlog_free(&b, 120, TLOG_A);
    tlog_end_chunk(&b);
    ck_assert_int_eq(rd_open_mem(&lf, b.buf, b.len, "worker's checkpoint"), 0);
    static const want_t want[] = {{GMLOG_ALLOC, RD_EVENT, 10}, {GMLOG_FREE, RD_EVENT, 120}};
    ck_assert_uint_eq(read_expecting(&lf, want, 2, "in order"), 2);
    ck_assert_msg(!lf.partial, "partial: %s", lf.ndiags ? lf.diags[0].msg : "");
    rd_close(&lf);
    ck_assert_int_eq(rd_open_mem(&lf, b.buf, b.len, "worker's checkpoint"), 0);
    rd_window(&lf, 100, UINT64_MAX);
    rd_rewind(&lf);
    while (rd_next(&lf, &r))
        ;
    ck_assert_msg(lf.partial && has_diag(&lf, "checkpoint 3 ends without its beginning", NULL),
                  "a window starting inside a span was read as whole: partial %d", lf.partial);
    rd_close(&lf);
    tlog_free_buf(&b);
}
END_TEST

/* Before the checkpoint, missing chunks are the space it let the writer reuse; after it, a
 * chunk missing is damage as in any log. */
START_TEST(test_gaps_after_a_wrapped_logs_checkpoint_are_damage)
{
    tlog_t b;
    tlog_wrapped_example(&b, 1, 1);
    tlog_chunk(&b, 1001, 6, 5, 3000 * MS); /* thread chunk 4 (from 2.05 s on) is missing */
    tlog_alloc(&b, 3000 * MS, TLOG_SEG + 0x1000000, 4096, 0, 8);
    tlog_end_chunk(&b);
    rd_log_t lf;
    ck_assert_int_eq(rd_open_mem(&lf, b.buf, b.len, "gap"), 0);
    ck_assert_msg(lf.partial && lf.ndiags == 1 && has_diag(&lf, "thread 1001: chunk 5 follows chunk 3", NULL),
                  "%zu diagnostics, the first: %s", lf.ndiags, lf.ndiags ? lf.diags[0].msg : "");
    rd_close(&lf);
    tlog_free_buf(&b);
}
END_TEST

START_TEST(test_a_wrapped_log_without_a_complete_checkpoint_is_damaged)
{
    tlog_t b;
    tlog_wrapped_example(&b, 1, 0); /* the checkpoint has no END */
    rd_log_t lf;
    ck_assert_int_eq(rd_open_mem(&lf, b.buf, b.len, "no checkpoint"), 0);
    uint64_t off = 0;
    ck_assert_msg(lf.partial && lf.ndiags == 1 && has_diag(&lf, "holds no complete checkpoint", &off) && off == 44,
                  "%zu diagnostics, the first at %llu: %s", lf.ndiags, (unsigned long long)off,
                  lf.ndiags ? lf.diags[0].msg : "");
    rd_rec_t r;
    unsigned n = 0, ckpt = 0;
    while (rd_next(&lf, &r))
        n++, ckpt += r.ckpt != RD_EVENT;
    ck_assert_msg(n == 13 && !ckpt, "%u records, %u of the checkpoint", n, ckpt);
    rd_close(&lf);
    tlog_free_buf(&b);
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
    tcase_add_test(dmg, test_a_log_killed_at_its_start_reads_as_an_empty_unclosed_run);
    tcase_add_test(dmg, test_closed_log_cut_at_a_chunk_boundary_reads_as_truncated);
    tcase_add_test(dmg, test_old_log_closed_at_exit_without_its_end_record_is_partial);
    tcase_add_test(dmg, test_chunk_past_the_close_is_reported);
    tcase_add_test(dmg, test_diagnostics_after_the_last_record_are_kept_once);
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
    TCase *ck = tcase_create("checkpoints");
    tcase_add_test(ck, test_a_wrapped_log_is_read_from_its_checkpoint);
    tcase_add_test(ck, test_a_log_that_did_not_wrap_skips_its_checkpoints);
    tcase_add_test(ck, test_gaps_after_a_wrapped_logs_checkpoint_are_damage);
    tcase_add_test(ck, test_a_wrapped_log_without_a_complete_checkpoint_is_damaged);
    suite_add_tcase(s, ck);
    return s;
}
