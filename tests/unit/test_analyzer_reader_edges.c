/* Unit tests of the reader (analyzer/reader*.c) at the edges of its input: a pipe or device that
 * is no log (refused from its first bytes, never read whole), a log closed by a fatal signal and
 * cut at a chunk boundary, and a bounded log read while its writer is still writing it. */
#include "cli.h"
#include "reader.h"
#include "suites.h"
#include "testlog.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- pipes ------------------------------------------------------------------------------------ */

typedef struct feeder {
    const char *fifo;
    uint8_t byte;              /* what it writes, over and over */
    size_t limit;              /* at most this many bytes */
    size_t written;
} feeder_t;

static void *feed(void *arg)
{
    feeder_t *f = arg;
    int fd = open(f->fifo, O_WRONLY);
    if (fd < 0)
        return NULL;
    static uint8_t buf[1 << 16];
    memset(buf, f->byte, sizeof buf);
    while (f->written < f->limit) {
        ssize_t n = write(fd, buf, sizeof buf);
        if (n <= 0)
            break; /* EPIPE: the reader closed its end */
        f->written += (size_t)n;
    }
    close(fd);
    return NULL;
}

/* What a pipe of `byte`s does to the reader: its message, and how much the writer got to write. */
static size_t read_from_pipe(uint8_t byte, size_t limit, char *msg, size_t msglen)
{
    char fifo[600];
    snprintf(fifo, sizeof fifo, "%s/pipe-%u", temp_dir(), byte);
    unlink(fifo);
    ck_assert_msg(mkfifo(fifo, 0600) == 0, "mkfifo %s: %s", fifo, strerror(errno));
    signal(SIGPIPE, SIG_IGN);
    feeder_t f = {fifo, byte, limit, 0};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, feed, &f), 0);
    rd_log_t lf;
    int rc = rd_open_path(&lf, fifo);
    snprintf(msg, msglen, "%s", lf.ndiags ? lf.diags[0].msg : "");
    ck_assert_msg(rc == -1 && lf.fatal, "a pipe of %zu bytes 0x%02x opened as a log (rc %d)", limit, byte, rc);
    rd_close(&lf);
    pthread_join(th, NULL);
    unlink(fifo);
    return f.written;
}

/* `gmshim summary /dev/zero` once read until memory ran out: a pipe's first bytes decide. */
START_TEST(test_a_pipe_that_is_no_log_is_refused_before_it_is_read_whole)
{
    char msg[256];
    size_t text = read_from_pipe('x', (size_t)256 << 20, msg, sizeof msg);
    ck_assert_msg(text < ((size_t)8 << 20) && strstr(msg, "not a gmshim log"),
                  "a pipe of text: %zu bytes read before '%s'", text, msg);
    /* zeros may be a header never written, at most 64 MiB of it */
    size_t zeros = read_from_pipe(0, (size_t)512 << 20, msg, sizeof msg);
    ck_assert_msg(zeros < ((size_t)128 << 20) && strstr(msg, "not a gmshim log"),
                  "a pipe of zeros: %zu bytes read before '%s'", zeros, msg);
}
END_TEST

/* ---- a log closed by a fatal signal ----------------------------------------------------------- */

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

/* Records chunk by chunk in a file that SIGTERM ended (the handler closes the header, no END
 * record, the file not trimmed): a copy cut at a chunk boundary before the last chunk written
 * lost records and must read as cut; one cut after it lost only unused chunks. */
START_TEST(test_a_log_closed_by_a_signal_and_cut_at_a_chunk_boundary_reads_as_cut)
{
    char log[600], env_log[700];
    snprintf(log, sizeof log, "%s/term.gmlog", temp_dir());
    unlink(log);
    snprintf(env_log, sizeof env_log, "GMSHIM_LOG=%s", log);
    const char *env[] = {env_log, "FAKECUDA_MEM=1G", NULL};
    int fd = -1;
    pid_t pid = spawn_preloaded("tests/integration/alloc_until_killed", env, &fd);
    ck_assert_msg(pid > 0, "cannot start the program: %s", strerror(errno));
    char buf[256] = "";
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    kill(pid, SIGTERM);
    int status;
    waitpid(pid, &status, 0);
    ck_assert_msg(n > 0 && strstr(buf, "ready"), "the program never said it was ready: '%s'", n > 0 ? buf : "");
    ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM, "not ended by SIGTERM (status 0x%x)", status);
    size_t len;
    uint8_t *data = slurp(log, &len);
    unlink(log);
    rd_log_t lf;
    ck_assert_msg(data && rd_open_mem(&lf, data, len, "whole") == 0, "the log does not open");
    uint32_t hs = lf.hdr.header_size;
    size_t used = 0; /* chunks up to the last one written */
    for (size_t i = 0; i < lf.nchunks; i++)
        if ((lf.chunks[i].off - hs) / GMLOG_CHUNK_SIZE + 1 > used)
            used = (size_t)((lf.chunks[i].off - hs) / GMLOG_CHUNK_SIZE + 1);
    ck_assert_msg((lf.hdr.flags & GMLOG_F_CLOSED) && (lf.hdr.close_reason & 0xff) == GMLOG_CLOSE_SIGNAL &&
                  !lf.partial && used >= 3, "the whole log: flags %u, reason 0x%x, partial %d, %zu chunks written",
                  lf.hdr.flags, lf.hdr.close_reason, lf.partial, used);
    rd_close(&lf);
    for (size_t k = 1; k <= used; k++) {
        ck_assert_int_eq(rd_open_mem(&lf, data, hs + k * GMLOG_CHUNK_SIZE, "cut"), 0);
        rd_rec_t r;
        while (rd_next(&lf, &r))
            ;
        int cut = lf.partial && lf.truncated;
        ck_assert_msg(k < used ? cut : !lf.partial, "cut after %zu of the %zu chunks written: partial %d, truncated "
                      "%d (%s)", k, used, lf.partial, lf.truncated, lf.ndiags ? lf.diags[0].msg : "no message");
        rd_close(&lf);
    }
    free(data);
}
END_TEST

/* ---- a log read while its writer goes on ------------------------------------------------------- */

#define MOVED_SIZE (777 * 512) /* the size only the chunk written after the open allocates */

/* Thread 1's second chunk is given to thread 3 after the reader opened the log, as a bounded
 * log's writer reuses the space of records older than its newest checkpoint: the reader must not
 * read thread 3's records as thread 1's, and says the log changed while read (live, not damaged). */
START_TEST(test_a_chunk_rewritten_after_the_open_is_not_read_as_its_old_self)
{
    char log[600];
    snprintf(log, sizeof log, "%s/live.gmlog", temp_dir());
    tlog_t b = {0};
    tlog_begin(&b, 0);
    gmlog_file_header_t *h = (gmlog_file_header_t *)b.buf;
    h->flags = 0, h->end_ns = 0, h->close_reason = 0, h->chunks_at_close = 0; /* still being written */
    tlog_chunk(&b, 1, 0, 0, 0);
    tlog_device(&b, 0, "GPU", 8 * 1024 * TLOG_MiB);
    tlog_segment(&b, 10, GMLOG_SEGMENT_ALLOC, TLOG_SEG, 64 * TLOG_MiB);
    tlog_alloc(&b, 20, TLOG_A, TLOG_MiB, 0, 0);
    tlog_end_chunk(&b);
    tlog_chunk(&b, 2, 1, 0, 0);
    tlog_alloc(&b, 30, TLOG_D, TLOG_MiB, 0, 0);
    tlog_end_chunk(&b);
    tlog_chunk(&b, 1, 2, 1, 40);
    tlog_free(&b, 50, TLOG_A);
    tlog_end_chunk(&b);
    ck_assert_msg(tlog_write(&b, log) == 0, "cannot write %s", log);
    size_t chunk2 = b.len - GMLOG_CHUNK_SIZE;
    tlog_free_buf(&b);
    rd_log_t lf;
    ck_assert_msg(rd_open_path(&lf, log) == 0, "the log does not open: %s", lf.diags[0].msg);
    /* the writer moves on: chunk 2 becomes thread 3's first */
    tlog_t n = {0};
    tlog_begin(&n, 0);
    size_t hs = n.len;
    tlog_chunk(&n, 3, 5, 0, 60);
    tlog_alloc(&n, 70, TLOG_SEG + 0x400000, MOVED_SIZE, 0, 0);
    tlog_end_chunk(&n);
    FILE *f = fopen(log, "r+b");
    ck_assert_msg(f && fseek(f, (long)chunk2, SEEK_SET) == 0 && fwrite(n.buf + hs, 1, GMLOG_CHUNK_SIZE, f) ==
                  GMLOG_CHUNK_SIZE, "cannot rewrite chunk 2");
    fclose(f);
    tlog_free_buf(&n);
    rd_rec_t r;
    unsigned moved = 0;
    while (rd_next(&lf, &r)) {
        gmlog_alloc_t a;
        memcpy(&a, r.p, r.len < sizeof a ? r.len : sizeof a);
        moved += r.type == GMLOG_ALLOC && (a.size & GMLOG_SIZE_MASK) == MOVED_SIZE;
    }
    char state[256];
    cli_close_state(&lf, NULL, state, sizeof state);
    ck_assert_msg(!moved && !lf.partial && strstr(state, "changed while"), "%u records of the chunk written after "
                  "the open were read as thread 1's; partial %d (%s); close state '%s'", moved, lf.partial,
                  lf.ndiags ? lf.diags[0].msg : "", state);
    rd_close(&lf);
}
END_TEST

/* The writer claiming chunks while the open indexes them: thread 1's second chunk is claimed
 * (its header stored) just after the open read its slot as unused, and its third after that
 * (the open saw it: a gap). */
static const char *claimed_log;
static int claims_left;

static void claim_after_index(const rd_log_t *lf)
{
    if (!claims_left || claims_left-- != 1)
        return;
    tlog_t n = {0};
    tlog_begin(&n, 0);
    size_t hs = n.len;
    tlog_chunk(&n, 1, 1, 1, 40);
    tlog_free(&n, 50, TLOG_A);
    tlog_end_chunk(&n);
    FILE *f = fopen(claimed_log, "r+b");
    ck_assert_msg(f && fseek(f, (long)(hs + GMLOG_CHUNK_SIZE), SEEK_SET) == 0 &&
                  fwrite(n.buf + hs, 1, GMLOG_CHUNK_SIZE, f) == GMLOG_CHUNK_SIZE, "cannot claim chunk 1");
    fclose(f);
    tlog_free_buf(&n);
    (void)lf;
}

/* A live log's chunk claimed while the open indexed it is the writer moving on, not a chunk
 * missing: the open reads the log again and finds it whole. */
START_TEST(test_a_chunk_claimed_during_the_open_is_not_damage)
{
    char log[600];
    snprintf(log, sizeof log, "%s/claiming.gmlog", temp_dir());
    tlog_t b = {0};
    tlog_begin(&b, 0);
    gmlog_file_header_t *h = (gmlog_file_header_t *)b.buf;
    h->flags = 0, h->end_ns = 0, h->close_reason = 0, h->chunks_at_close = 0; /* still being written */
    tlog_chunk(&b, 1, 0, 0, 0);
    tlog_device(&b, 0, "GPU", 8 * 1024 * TLOG_MiB);
    tlog_alloc(&b, 20, TLOG_A, TLOG_MiB, 0, 0);
    tlog_end_chunk(&b);
    tlog_zeros(&b); /* chunk 1: claimed by thread 1 during the open */
    tlog_chunk(&b, 1, 2, 2, 60);
    tlog_alloc(&b, 70, TLOG_D, TLOG_MiB, 0, 0);
    tlog_end_chunk(&b);
    ck_assert_msg(tlog_write(&b, log) == 0, "cannot write %s", log);
    tlog_free_buf(&b);
    claimed_log = log;
    claims_left = 1;
    rd_index_hook = claim_after_index;
    rd_log_t lf;
    int rc = rd_open_path(&lf, log);
    rd_index_hook = NULL;
    ck_assert_msg(rc == 0, "the log does not open: %s", lf.diags[0].msg);
    unsigned frees = 0;
    rd_rec_t r;
    while (rd_next(&lf, &r))
        frees += r.type == GMLOG_FREE;
    ck_assert_msg(!lf.partial && frees == 1, "a chunk claimed during the open: partial %d (%s), %u frees read",
                  lf.partial, lf.ndiags ? lf.diags[0].msg : "", frees);
    rd_close(&lf);
    unlink(log);
}
END_TEST

Suite *analyzer_reader_edges_suite(void)
{
    Suite *s = suite_create("analyzer_reader_edges");
    TCase *tc = tcase_create("edges");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_a_pipe_that_is_no_log_is_refused_before_it_is_read_whole);
    tcase_add_test(tc, test_a_log_closed_by_a_signal_and_cut_at_a_chunk_boundary_reads_as_cut);
    tcase_add_test(tc, test_a_chunk_rewritten_after_the_open_is_not_read_as_its_old_self);
    tcase_add_test(tc, test_a_chunk_claimed_during_the_open_is_not_damage);
    suite_add_tcase(s, tc);
    return s;
}
