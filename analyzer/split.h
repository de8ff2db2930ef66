/* The split of an OOM's reserved memory, one function computing it and one printing it (oom,
 * report and whatif share them): what the run needed (the floor), what it reserved as it ran,
 * and the difference in parts that add up exactly — the plan's own packing, what only offline
 * planning saves, what a tested setting saves — and of what the pool lacked under its cap, the
 * part a setting avoids, the part only planning avoids and the part over the device (capacity). */
#ifndef GM_SPLIT_H
#define GM_SPLIT_H

#include "json.h"

#include <stdint.h>
#include <stdio.h>

typedef struct split {
    uint64_t floor;            /* needed: live bytes + the request (plan.h) */
    uint64_t reserved;         /* reserved as run: at the failure + the segment it asked for */
    uint64_t planned;          /* the plan's peak, held to [floor, reserved] */
    uint64_t with_setting;     /* reserved under the recommended setting, held to [planned, reserved];
                                  reserved when there is none */
    uint64_t plan_over;        /* planned - floor: what even the plan needs beyond it (an earlier peak of live
                                  memory, gaps between blocks) */
    uint64_t only_by_planning; /* with_setting - planned */
    uint64_t by_setting;       /* reserved - with_setting */
    uint64_t cap;              /* what the pool could reserve */
    uint64_t lacked;           /* reserved - cap, 0 when it was not short */
    uint64_t lacked_setting, lacked_planning, lacked_capacity; /* lacked, in parts */
    int planned_known;         /* a plan was made (else planned = reserved: nothing attributed) */
    char setting[200];         /* "NAME=VALUE", "" for none */
} split_t;

/* reserved = floor + packing + only_by_planning + by_setting and lacked = lacked_setting +
 * lacked_planning + lacked_capacity, exactly. with_setting 0: no setting tested. */
void split_make(split_t *s, uint64_t floor, uint64_t planned, int planned_known, uint64_t reserved,
                uint64_t with_setting, uint64_t cap, const char *env_name, const char *env_value);
/* NULL when the parts add up, else which sum does not. */
const char *split_check(const split_t *s);
void split_text(FILE *f, const split_t *s, const char *indent);
void split_json(json_t *j, const split_t *s);

#endif
