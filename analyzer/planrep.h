/* The floor and the plan at each device's peak, as `report` and `whatif` print them: the bytes
 * live when they peaked, the offline plan's peak around then (plan.h) and the reserved peak as
 * recorded, each with its utilization (allocated / reserved). */
#ifndef GM_PLANREP_H
#define GM_PLANREP_H

#include "cli.h"
#include "plan.h"

/* One device's line (text) or object (JSON) from its decoded events. */
void planrep_peak_text(FILE *f, const rp_log_t *log, const plan_point_t *p, const char *lead);
void planrep_peak_json(json_t *j, const rp_log_t *log, const plan_point_t *p);
/* Every device of the model's log, decoded again (bounded as the causes' replay is). */
void rep_plan_text(cli_ctx_t *c, const model_t *m);
void rep_plan_json(cli_ctx_t *c, const model_t *m);

#endif
