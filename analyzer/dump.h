/* `gmshim dump`: every record as text or JSON lines, with the header and metadata. */
#ifndef GM_DUMP_H
#define GM_DUMP_H

#include "frame.h"

extern const char cmd_dump_usage[];
/* Dumps every record (text, or one JSON object per line); returns the exit status. */
int rep_dump(cli_ctx_t *c, rd_log_t *lf);

#endif
