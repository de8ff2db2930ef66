/* The helpers the PyTorch bridge's suites share (defined in test_torchev.c, used by
 * test_torchload.c too): a scratch directory per test, small file helpers, and a log of the
 * test process read back by record type. */
#ifndef GM_TEST_TORCHTEST_H
#define GM_TEST_TORCHTEST_H

#include "gmlog.h"

/* A new scratch directory for the test (the cases' checked fixture) and its path. */
void new_scratch(void);
const char *scratch(void);
/* Writes text to path; creates a directory and its parents (the test fails when it cannot). */
void write_text(const char *path, const char *text);
void mkdir_p(const char *path);
/* A log of this test process (each test runs in its own fork) with sites on; its path. */
const char *open_log(void);

typedef struct counts {
    unsigned by_type[GMLOG_TYPE_MAX + 1];
    unsigned sited[GMLOG_TYPE_MAX + 1];
    gmlog_tensor_t first_alloc;
} counts_t;

/* Closes the log and counts its records by type (and those with a site), keeping the first ALLOC. */
counts_t read_back(const char *path);

#endif
