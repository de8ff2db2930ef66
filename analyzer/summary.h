/* `gmshim summary` and its section: per device counts, peaks, hit rate, driver calls. */
#ifndef GM_SUMMARY_H
#define GM_SUMMARY_H

#include "frame.h"

extern const char cmd_summary_usage[];
void cmd_summary_text(cli_ctx_t *c, rd_log_t *lf, model_t *m, void *arg);
void cmd_summary_json(cli_ctx_t *c, rd_log_t *lf, model_t *m, void *arg);
void rep_summary_text(cli_ctx_t *c, const model_t *m);
void rep_summary_json(cli_ctx_t *c, const model_t *m);   /* "devices": [...] */
void rep_summary_device_json(json_t *j, const model_t *m, const model_dev_t *d);

#endif
