/* `gmshim frag` and its section: fragmentation over time, at the peak and at each OOM. */
#ifndef GM_FRAG_H
#define GM_FRAG_H

#include "frame.h"

extern const char cmd_frag_usage[];
void cmd_frag_text(cli_ctx_t *c, rd_log_t *lf, model_t *m, void *arg);
void cmd_frag_json(cli_ctx_t *c, rd_log_t *lf, model_t *m, void *arg);
void rep_frag_text(cli_ctx_t *c, const model_t *m, int over_time);
void rep_frag_json(cli_ctx_t *c, const model_t *m, int over_time);         /* "fragmentation": [...] */

#endif
