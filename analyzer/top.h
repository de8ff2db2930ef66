/* `gmshim top`: running logs followed. */
#ifndef GM_TOP_H
#define GM_TOP_H

#include "frame.h"

int cmd_top(int argc, char **argv);

#endif
