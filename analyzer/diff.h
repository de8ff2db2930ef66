/* `gmshim diff`: two runs compared (peaks, sites), a CI gate. */
#ifndef GM_DIFF_H
#define GM_DIFF_H

#include "frame.h"

int cmd_diff(int argc, char **argv);

#endif
