/* The Perfetto writer: logs as Chrome trace JSON (counters per device, blocks, marks, OOMs). */
#ifndef GM_EXPORT_PERFETTO_H
#define GM_EXPORT_PERFETTO_H

#include "export_replay.h"

/* 0, or the exit status of a failure (said on stderr). */
int export_perfetto(int nlogs, char **logs, const export_opts_t *o);

#endif
