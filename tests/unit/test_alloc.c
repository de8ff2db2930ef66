/* What the hooks call (shim/alloc.c), under the preload: odd arguments as the real runtime
 * treats them, pass-through, cudaMemGetInfo with the cache and a cap, forwarded allocations. */
#include "suites.h"
#include "test_analyzer_cli.h"

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

START_TEST(test_odd_arguments_behave_as_the_real_runtime)
{
    RUN_OK("tests/integration/odd_args", "FAKECUDA_MEM=1G");
}
END_TEST

START_TEST(test_pass_through_forwards_every_call_and_counts)
{
    const char *env[] = {"FAKECUDA_MEM=1G", "GMSHIM_POOL=0", NULL};
    char *out = NULL;
    int rc = run_built("tests/integration/pool_hits", env, NULL, &out);
    /* pool_hits insists on pool hits: with the pool off the driver sees every call. */
    ck_assert_msg(rc != 0 && strstr(out, "new cudaMalloc calls"), "exit %d:\n%s", rc, out);
    free(out);
    RUN_OK("tests/integration/odd_args", "FAKECUDA_MEM=1G", "GMSHIM_POOL=0");
    RUN_OK("tests/integration/threads", "FAKECUDA_MEM=4G", "GMSHIM_POOL=0");
}
END_TEST

START_TEST(test_memgetinfo_counts_the_cache_as_free)
{
    RUN_OK("tests/integration/memgetinfo", "FAKECUDA_MEM=1G");
}
END_TEST

START_TEST(test_device_limit_caps_the_pool_and_memgetinfo)
{
    const char *env[] = {"FAKECUDA_MEM=1G", "GMSHIM_DEVICE_LIMIT=256M", NULL};
    char *out = NULL;
    int rc = run_built("tests/integration/memgetinfo", env, "cap", &out);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    free(out);
    const char *env2[] = {"FAKECUDA_MEM=1G", "GMSHIM_DEVICE_LIMIT=0.25", NULL};
    rc = run_built("tests/integration/memgetinfo", env2, "cap", &out);
    ck_assert_msg(rc == 0, "a fraction of the device: exit %d:\n%s", rc, out);
    free(out);
}
END_TEST

START_TEST(test_unpooled_calls_are_forwarded_and_counted)
{
    classic_pool_test();
    const char *env[] = {"FAKECUDA_MEM=1G", NULL};
    char *out = NULL;
    int rc = run_built("tests/integration/unpooled", env, NULL, &out);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    const char *w = strstr(out, "cudaIpcGetMemHandle");
    ck_assert_msg(w != NULL, "no warning for an IPC handle on a sub-block:\n%s", out);
    ck_assert_msg(strstr(w + 1, "cudaIpcGetMemHandle") == NULL, "warned more than once:\n%s", out);
    free(out);
}
END_TEST

/* PyTorch's cudaMallocAsync backend: the runtime's refusal reaches the program as it is (its last
 * error too), and the log has it as an OOM (flagged async) at the line that asked. */
START_TEST(test_a_refused_cudamallocasync_is_logged_as_an_oom_at_its_line)
{
    char log[600], logenv[640];
    snprintf(log, sizeof log, "%s/async.gmlog", temp_dir());
    snprintf(logenv, sizeof logenv, "GMSHIM_LOG=%s", log);
    const char *env[] = {"FAKECUDA_MEM=256M", logenv, NULL};
    char *out = NULL;
    int rc = run_built("tests/integration/async_oom", env, NULL, &out);
    ck_assert_msg(rc == 0 && strstr(out, "async_oom: refused at step"), "exit %d:\n%s", rc, out);
    free(out);
    rc = gm(&out, "--color=never", "oom", log);
    ck_assert_msg(rc == 0 && strstr(out, "OOM 1 on device 0") && strstr(out, "8.00 MiB asked for") &&
                      strstr(out, "from     keep_activation (async_oom.c:"),
                  "oom: exit %d:\n%s", rc, out);
    free(out);
    rc = gm(&out, "--json", "dump", log);
    ck_assert_msg(rc == 0 && strstr(out, "\"async\":true"), "dump: exit %d:\n%.3000s", rc, out);
    free(out);
}
END_TEST

Suite *alloc_suite(void)
{
    Suite *s = suite_create("alloc");
    TCase *tc = tcase_create("preload");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_odd_arguments_behave_as_the_real_runtime);
    tcase_add_test(tc, test_pass_through_forwards_every_call_and_counts);
    tcase_add_test(tc, test_memgetinfo_counts_the_cache_as_free);
    tcase_add_test(tc, test_device_limit_caps_the_pool_and_memgetinfo);
    tcase_add_test(tc, test_unpooled_calls_are_forwarded_and_counted);
    tcase_add_test(tc, test_a_refused_cudamallocasync_is_logged_as_an_oom_at_its_line);
    suite_add_tcase(s, tc);
    return s;
}
