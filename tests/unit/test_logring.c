/* Where the log's chunks go (shim/logring.c), under the preload: pages faulted in ahead and
 * the file cut back at exit. */
#include "suites.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The writer maps the next 16 MiB of the log ahead and its helper thread faults them in, not the
 * thread that writes; the end of the run cuts the file back to what was written. */
START_TEST(test_log_pages_are_faulted_in_ahead_by_the_helper_and_cut_back_at_exit)
{
    const char *dir = temp_dir();
    char log[512], logenv[600];
    snprintf(log, sizeof log, "%s/ahead.gmlog", dir);
    snprintf(logenv, sizeof logenv, "GMSHIM_LOG=%s", log);
    RUN_OK("tests/integration/log_ahead", "FAKECUDA_MEM=1G", logenv);
    struct stat st;
    ck_assert_int_eq(stat(log, &st), 0);
    ck_assert_msg(st.st_size < (1 << 20), "after the run the log is still %lld bytes", (long long)st.st_size);
    unlink(log);
    rmdir(dir);
}
END_TEST

Suite *logring_suite(void)
{
    Suite *s = suite_create("logring");
    TCase *tc = tcase_create("preload");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_log_pages_are_faulted_in_ahead_by_the_helper_and_cut_back_at_exit);
    suite_add_tcase(s, tc);
    return s;
}
