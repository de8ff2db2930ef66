/* `gmshim report`: everything on one page, and the cross-rank verdict before it. */
#ifndef GM_REPORT_H
#define GM_REPORT_H

#include "frame.h"

extern const char cmd_report_usage[];
void cmd_report_text(cli_ctx_t *c, rd_log_t *lf, model_t *m, void *arg);
void cmd_report_json(cli_ctx_t *c, rd_log_t *lf, model_t *m, void *arg);
int cmd_report_before(cmd_call_t *k);
int cmd_report_after(cmd_call_t *k, int rc);

#endif
