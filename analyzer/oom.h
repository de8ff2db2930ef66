/* `gmshim oom` and its section: each failure, what was asked and there, its cause, remedies. */
#ifndef GM_OOM_H
#define GM_OOM_H

#include "frame.h"
#include "oom_classify.h"

int cmd_oom(int argc, char **argv);
void rep_oom_text(cli_ctx_t *c, const model_t *m);
void rep_oom_json(cli_ctx_t *c, const model_t *m);                        /* "ooms", "retries" */

#endif
