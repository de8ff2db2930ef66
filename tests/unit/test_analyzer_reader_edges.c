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

Suite *analyzer_reader_edges_suite(void)
{
    Suite *s = suite_create("analyzer_reader_edges");
    TCase *tc = tcase_create("edges");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_a_pipe_that_is_no_log_is_refused_before_it_is_read_whole);
    suite_add_tcase(s, tc);
    return s;
}
