/* Running a replay's events (replay_run.c): the roof of the replay engine, over the pool and
 * driver replay.c keeps. */
#ifndef GM_REPLAY_RUN_H
#define GM_REPLAY_RUN_H

#include "replay.h"

/* Runs events up to index `until` (exclusive), or to the first failure when r->stop_on_fail. */
void replay_run(replay_t *r, size_t until);

#endif
