/* `gmshim whatif`: a log replayed under other settings (whatif_search.h: the runs, the grid,
 * the bisection), printed. */
#ifndef GM_WHATIF_H
#define GM_WHATIF_H

#include "whatif_search.h"

int cmd_whatif(int argc, char **argv);

#endif
