/* The test runner: every suite, one Check summary at the end (the last line `make test` prints). */
#include "suites.h"

#include <stdlib.h>

int main(void)
{
    /* Logs the integration programs write (tests/unit/helpers.c) from an earlier run go. */
    if (system("rm -rf /tmp/gmshim-tests") != 0)
        return EXIT_FAILURE;
    SRunner *sr = srunner_create(pool_suite());
    srunner_add_suite(sr, options_suite());
    srunner_add_suite(sr, device_suite());
    srunner_add_suite(sr, integration_suite());
    srunner_add_suite(sr, cupti_suite());
    srunner_add_suite(sr, evlog_suite());
    srunner_add_suite(sr, cut_suite());
    srunner_add_suite(sr, analyzer_reader_suite());
    srunner_add_suite(sr, analyzer_model_suite());
    srunner_add_suite(sr, analyzer_symbolize_suite());
    srunner_add_suite(sr, analyzer_json_suite());
    srunner_add_suite(sr, analyzer_oom_suite());
    srunner_add_suite(sr, analyzer_cli_suite());
    srunner_add_suite(sr, analyzer_args_suite());
    srunner_add_suite(sr, analyzer_ranks_suite());
    srunner_add_suite(sr, torchev_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
