/* `gmshim timeline`: the SVG or the HTML page of a log's timeline, written. */
#ifndef GM_TIMELINE_SVG_H
#define GM_TIMELINE_SVG_H

#include "model.h"

#include <stdio.h>

int cmd_timeline(int argc, char **argv);
/* Writes the timeline of a log as a self-contained SVG or HTML page. */
int rep_timeline_write(FILE *f, const rd_log_t *lf, const model_t *m, int html);

#endif
