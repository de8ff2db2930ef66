/* `gmshim run`: a command run under gmshim, then the report on the logs it wrote. */
#ifndef GM_RUN_H
#define GM_RUN_H

#include "frame.h"

extern const char cmd_run_usage[];
enum { CMD_RUN_NO_REPORT = 0x200 };  /* run's --no-report, a key without a letter */
int cmd_run_opt(cli_ctx_t *c, void *st, int key, const char *val);
int cmd_run_go(cmd_call_t *k);

#endif
