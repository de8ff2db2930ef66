/* The memory_viz writer: a log as PyTorch's memory snapshot pickle. */
#ifndef GM_EXPORT_MEMVIZ_H
#define GM_EXPORT_MEMVIZ_H

#include "export_replay.h"

/* 0, or the exit status of a failure (said on stderr). */
int export_memviz(const char *log, const export_opts_t *o);

#endif
