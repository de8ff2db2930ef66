/* Helpers of the analyzer's end-to-end suites (defined in test_analyzer_cli.c): build/gmshim
 * run with arguments, the fixtures' paths, small file and text helpers. */
#ifndef GM_TEST_ANALYZER_CLI_H
#define GM_TEST_ANALYZER_CLI_H

#include <stddef.h>
#include <stdint.h>

#define FIXTURE "tests/fixtures/demo.gmlog"
#define FIXTURE_DIR "tests/fixtures"
#define H200_TORCH_LEAK "tests/fixtures/h200_torch_leak_oom.gmlog"
#define H200_CUPTI_STATIC "tests/fixtures/h200_cupti_static_inject.gmlog"

/* Runs build/gmshim with the arguments up to the first NULL; returns the exit status, with
 * stdout and stderr in *out. */
int gm_cli(char **out, const char *const *args);
#define gm(out, ...) gm_cli(out, (const char *const[]){__VA_ARGS__, NULL})
/* How many times needle occurs in hay. */
size_t gm_count(const char *hay, const char *needle);
/* A whole file (the test fails when it cannot be read); its length in *len. */
uint8_t *gm_slurp(const char *path, size_t *len);
/* Writes a file (the test fails when it cannot). */
void gm_spew(const char *path, const void *data, size_t len);
/* Records tests/integration/<prog> (which must end in an expected OOM) and returns
 * `gmshim [--json] oom` of its log, whose path is left in gm_last_log (malloc'd). */
char *gm_oom_report(const char *prog, const char *extra_env, int json);
extern char gm_last_log[512];

#endif
