/* An output file written whole or not at all (timeline, export): the bytes go to a temporary
 * file beside it, renamed over it when the command succeeds and removed when it fails, so that a
 * failed command never leaves an empty or cut file, nor spoils the one that was there. */
#ifndef GM_OUTFILE_H
#define GM_OUTFILE_H

#include <stdio.h>

typedef struct outfile {
    FILE *f;      /* what to write to: the temporary file, stdout for "-", or a device itself */
    char *path;   /* the file asked for */
    char *tmp;    /* the temporary file, NULL when written in place (stdout, /dev/null, a FIFO) */
} outfile_t;

/* Opens the output for path ("-": stdout; not a regular file: written in place). NULL after
 * saying why on stderr, prefixed with who ("gmshim export"). */
FILE *outfile_open(outfile_t *o, const char *path, const char *mode, const char *who);
/* Closes the output and puts it in place: 0, or -1 after saying why (nothing left behind). */
int outfile_commit(outfile_t *o, const char *who);
/* Closes the output and removes what was written (a file written in place stays). */
void outfile_discard(outfile_t *o);

#endif
