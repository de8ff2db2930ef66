/* `gmshim leaks` and its section: what is live at the end or at a mark, by call site. */
#ifndef GM_LEAKS_H
#define GM_LEAKS_H

#include "frame.h"

extern const char cmd_leaks_usage[];
int cmd_leaks_opt(cli_ctx_t *c, void *st, int key, const char *val);
void cmd_leaks_text(cli_ctx_t *c, rd_log_t *lf, model_t *m, void *arg);
void cmd_leaks_json(cli_ctx_t *c, rd_log_t *lf, model_t *m, void *arg);
int cmd_leaks_after(cmd_call_t *k, int rc);
void rep_leaks_text(cli_ctx_t *c, const model_t *m, const leaks_opts_t *o);
void rep_leaks_json(cli_ctx_t *c, const model_t *m, const leaks_opts_t *o); /* "leaks": [...] */

#endif
