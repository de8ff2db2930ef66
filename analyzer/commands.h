/* The command table of the gmshim CLI (bpftool's descriptors): every command, by name, with its
 * parts (frame.h says what a command is). Only the table and main() include this: a command
 * includes its own header and the sections it prints. */
#ifndef GM_COMMANDS_H
#define GM_COMMANDS_H

#include "diff.h"
#include "dump.h"
#include "export.h"
#include "frag.h"
#include "frame.h"
#include "leaks.h"
#include "oom.h"
#include "report.h"
#include "run.h"
#include "summary.h"
#include "timeline_svg.h"
#include "top.h"
#include "whatif.h"

extern const cmd_t cmd_table[];
extern const size_t cmd_count;
/* The command of that name, or NULL. */
const cmd_t *cmd_find(const char *name);

#endif
