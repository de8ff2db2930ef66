/* Output files written whole or not at all (outfile.h): a temporary file in the same directory,
 * renamed over the target only once every byte is written. It never writes through a device or
 * FIFO into a temporary file: those are written in place. */
#include "outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void outfile_reset(outfile_t *o)
{
    free(o->path);
    free(o->tmp);
    *o = (outfile_t){0};
}

FILE *outfile_open(outfile_t *o, const char *path, const char *mode, const char *who)
{
    *o = (outfile_t){0};
    if (!strcmp(path, "-")) {
        o->f = stdout;
        return o->f;
    }
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) { /* /dev/null, /dev/stdout, a FIFO */
        o->f = fopen(path, mode);
        if (!o->f)
            fprintf(stderr, "%s: cannot write %s: %s\n", who, path, strerror(errno));
        return o->f;
    }
    const char *slash = strrchr(path, '/');
    size_t dirlen = slash ? (size_t)(slash - path) + 1 : 0;
    size_t len = strlen(path) + 16;
    o->path = strdup(path);
    o->tmp = malloc(len);
    if (!o->path || !o->tmp) {
        fprintf(stderr, "%s: out of memory\n", who);
        outfile_reset(o);
        return NULL;
    }
    /* hidden, beside the target (a rename stays in one file system) */
    snprintf(o->tmp, len, "%.*s.%s.XXXXXX", (int)dirlen, path, path + dirlen);
    int fd = mkstemp(o->tmp);
    if (fd < 0) {
        fprintf(stderr, "%s: cannot write %s: %s\n", who, path, strerror(errno));
        outfile_reset(o);
        return NULL;
    }
    mode_t mask = umask(0);
    umask(mask);
    (void)fchmod(fd, 0666 & ~mask); /* as fopen would have created it */
    o->f = fdopen(fd, mode);
    if (!o->f) {
        fprintf(stderr, "%s: cannot write %s: %s\n", who, path, strerror(errno));
        close(fd);
        unlink(o->tmp);
        outfile_reset(o);
    }
    return o->f;
}

int outfile_commit(outfile_t *o, const char *who)
{
    if (!o->f)
        return -1;
    int bad = ferror(o->f) != 0;
    bad |= o->f == stdout ? fflush(o->f) != 0 : fclose(o->f) != 0;
    int err = errno;
    if (!bad && o->tmp && rename(o->tmp, o->path) != 0) {
        bad = 1;
        err = errno;
    }
    if (bad) {
        fprintf(stderr, "%s: error writing %s: %s\n", who, o->path ? o->path : "the output", strerror(err ? err : EIO));
        if (o->tmp)
            unlink(o->tmp);
    }
    outfile_reset(o);
    return bad ? -1 : 0;
}

void outfile_discard(outfile_t *o)
{
    if (o->f && o->f != stdout)
        fclose(o->f);
    else if (o->f)
        fflush(o->f);
    if (o->tmp)
        unlink(o->tmp);
    outfile_reset(o);
}
