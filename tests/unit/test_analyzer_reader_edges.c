/* Unit tests of the reader (analyzer/reader*.c) at the edges of its input: a pipe or device that
 * is no log (refused from its first bytes, never read whole), a log closed by a fatal signal and
 * cut at a chunk boundary, and a bounded log read while its writer is still writing it. */
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

Suite *analyzer_reader_edges_suite(void)
{
    Suite *s = suite_create("analyzer_reader_edges");
    TCase *tc = tcase_create("edges");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_a_pipe_that_is_no_log_is_refused_before_it_is_read_whole);
    tcase_add_test(tc, test_a_log_closed_by_a_signal_and_cut_at_a_chunk_boundary_reads_as_cut);
    suite_add_tcase(s, tc);
    return s;
}
