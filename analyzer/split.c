/* The split's arithmetic and its words. Each part is a difference of two figures held in order
 * (floor <= planned <= with_setting <= reserved), so the parts are never negative and add up. */
#include "split.h"
#include "output.h"

#include <string.h>

static uint64_t clamp(uint64_t v, uint64_t lo, uint64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

static uint64_t min64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

void split_make(split_t *s, uint64_t floor, uint64_t planned, int planned_known, uint64_t reserved,
                uint64_t with_setting, uint64_t cap, const char *env_name, const char *env_value)
{
    memset(s, 0, sizeof *s);
    s->floor = floor;
    s->reserved = reserved > floor ? reserved : floor; /* what served the floor reserved it at least */
    s->planned_known = planned_known;
    s->planned = planned_known ? clamp(planned, floor, s->reserved) : s->reserved;
    s->with_setting = with_setting ? clamp(with_setting, s->planned, s->reserved) : s->reserved;
    s->plan_over = s->planned - s->floor;
    s->only_by_planning = s->with_setting - s->planned;
    s->by_setting = s->reserved - s->with_setting;
    s->cap = cap;
    s->lacked = s->reserved > cap ? s->reserved - cap : 0;
    s->lacked_setting = min64(s->lacked, s->by_setting);
    s->lacked_planning = min64(s->lacked - s->lacked_setting, s->only_by_planning);
    s->lacked_capacity = s->lacked - s->lacked_setting - s->lacked_planning;
    if (s->by_setting && env_name && env_name[0]) /* a raised cap saves nothing: it is not named here */
        snprintf(s->setting, sizeof s->setting, "%s=%s", env_name, env_value ? env_value : "");
}

const char *split_check(const split_t *s)
{
    if (s->floor + s->plan_over + s->only_by_planning + s->by_setting != s->reserved)
        return "floor + plan_over + only by planning + by a setting is not the reserved";
    if (s->lacked_setting + s->lacked_planning + s->lacked_capacity != s->lacked)
        return "the parts of what the pool lacked do not add up";
    if (s->lacked != (s->reserved > s->cap ? s->reserved - s->cap : 0))
        return "what the pool lacked is not reserved - cap";
    if (s->floor > s->planned || s->planned > s->with_setting || s->with_setting > s->reserved)
        return "floor <= planned <= with a setting <= reserved does not hold";
    return NULL;
}

void split_text(FILE *f, const split_t *s, const char *in)
{
    char a[32], b[32], c[32], d[32], e[32], g[32];
    fprintf(f, "%ssplit    needed %s (live + the request), reserved as run %s (at the failure, with the segment "
            "it asked for) = needed + %s more that even the plan needs (earlier peaks, gaps) + %s only by planning + %s by a setting%s%s%s\n",
            in, rep_bytes(s->floor, a), rep_bytes(s->reserved, b), rep_bytes(s->plan_over, c),
            rep_bytes(s->only_by_planning, d), rep_bytes(s->by_setting, e), s->setting[0] ? " (" : "",
            s->setting, s->setting[0] ? ", tested by replay)" : "");
    if (s->lacked)
        fprintf(f, "%s         of the %s the pool lacked under the %s it could reserve: %s avoidable by a setting, "
                "%s only by planning, %s over the device: capacity\n", in, rep_bytes(s->lacked, a),
                rep_bytes(s->cap, b), rep_bytes(s->lacked_setting, c), rep_bytes(s->lacked_planning, d),
                rep_bytes(s->lacked_capacity, g));
    fprintf(f, "%s         utilization (allocated / reserved): %s as run, %s planned%s\n", in,
            rep_pct(s->floor, s->reserved, a), rep_pct(s->floor, s->planned, b),
            s->planned_known ? "" : " (no plan: the log could not be planned)");
}

void split_json(json_t *j, const split_t *s)
{
    json_obj(j, "split");
    json_u64(j, "needed", s->floor);
    json_u64(j, "reserved_as_run", s->reserved);
    json_u64(j, "planned", s->planned);
    json_bool(j, "planned_known", s->planned_known);
    json_u64(j, "with_setting", s->with_setting);
    json_str(j, "setting", s->setting[0] ? s->setting : NULL);
    json_u64(j, "plan_over_needed", s->plan_over);
    json_u64(j, "only_by_planning", s->only_by_planning);
    json_u64(j, "avoidable_by_setting", s->by_setting);
    json_u64(j, "cap", s->cap);
    json_u64(j, "lacked", s->lacked);
    json_u64(j, "lacked_avoidable_by_setting", s->lacked_setting);
    json_u64(j, "lacked_only_by_planning", s->lacked_planning);
    json_u64(j, "lacked_capacity", s->lacked_capacity);
    json_dbl(j, "utilization_as_run", s->reserved ? (double)s->floor / (double)s->reserved : 0);
    json_dbl(j, "utilization_planned", s->planned ? (double)s->floor / (double)s->planned : 0);
    json_obj_end(j);
}
