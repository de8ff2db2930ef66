/* Every Check suite of the runner; one test file per module defines one. */
#ifndef GM_TEST_SUITES_H
#define GM_TEST_SUITES_H

#include <check.h>

Suite *pool_suite(void);
Suite *options_suite(void);
Suite *device_suite(void);
Suite *integration_suite(void);
Suite *cupti_suite(void);
Suite *evlog_suite(void);
Suite *cut_suite(void);
Suite *analyzer_reader_suite(void);
Suite *analyzer_model_suite(void);
Suite *analyzer_symbolize_suite(void);
Suite *analyzer_json_suite(void);
Suite *analyzer_oom_suite(void);
Suite *analyzer_cli_suite(void);
Suite *analyzer_args_suite(void);
Suite *analyzer_ranks_suite(void);
Suite *torchev_suite(void);

/* Helpers shared by the suites (tests/unit/helpers.c). */
/* Absolute path of a file under the build directory (GMSHIM_BUILD). */
const char *build_path(const char *rel);
/* Runs argv with extra environment entries ("K=V", NULL-terminated) and the preload; captures
 * stdout+stderr into *out (malloc'd). Returns the exit status, or 128+signal. */
int run_program(const char *const *argv, const char *const *env, int preload, char **out);
/* Starts build/<prog> under the preload with extra environment entries ("K=V", NULL-terminated),
 * its stdout on a pipe whose reading end is *out_fd; returns its pid (the caller waits). */
int spawn_preloaded(const char *prog, const char *const *env, int *out_fd);
/* A fresh empty directory under /tmp for a test. */
const char *temp_dir(void);

#endif
