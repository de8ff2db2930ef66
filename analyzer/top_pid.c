/* `gmshim top PID`: the log a running process writes, found among its open files. The shim keeps
 * its log open for as long as it writes it, whatever GMSHIM_LOG's template made of the name, so
 * the process's descriptors name it more surely than its environment would. Read-only: the
 * process is never signalled or traced, its files only opened again for reading. */
#include "top_pid.h"
#include "gmlog.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A process id: digits only, and no file of that name (a log called "1234" stays a log). */
static int top_pid_operand(const char *arg)
{
    size_t n = strspn(arg, "0123456789");
    struct stat st;
    return n && n <= 9 && !arg[n] && arg[0] != '0' && lstat(arg, &st) != 0 && errno == ENOENT;
}

/* Whether the open file /proc/PID/fd/NAME is a regular file that starts as a gmshim log does. */
static int top_pid_is_log(const char *fdpath)
{
    int fd = open(fdpath, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return 0;
    struct stat st;
    char magic[8];
    int ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && pread(fd, magic, sizeof magic, 0) == (ssize_t)sizeof magic &&
             !memcmp(magic, GMLOG_MAGIC, sizeof magic);
    close(fd);
    return ok;
}

int top_pid_resolve(const char *arg, char **path)
{
    *path = NULL;
    if (!top_pid_operand(arg))
        return 0;
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%s/fd", arg);
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT)
            fprintf(stderr, "gmshim top: no process %s (and no file of that name)\n", arg);
        else
            fprintf(stderr, "gmshim top: process %s: its open files cannot be read: %s\n", arg, strerror(errno));
        return -1;
    }
    struct dirent *e;
    while (!*path && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char link[PATH_MAX], fdpath[384];
        snprintf(fdpath, sizeof fdpath, "%s/%s", dir, e->d_name);
        ssize_t n = readlink(fdpath, link, sizeof link - 1);
        if (n <= 0 || link[0] != '/')
            continue; /* a pipe, a socket, an anonymous file */
        link[n] = 0;
        if (top_pid_is_log(fdpath))
            *path = strdup(link);
    }
    closedir(d);
    if (!*path) {
        fprintf(stderr,
                "gmshim top: process %s has no gmshim log open (is it running under LD_PRELOAD=libgmshim.so, "
                "with GMSHIM_LOG not off, and has it made a CUDA call yet?)\n",
                arg);
        return -1;
    }
    struct stat st;
    if (stat(*path, &st) != 0) { /* deleted, or out of this mount namespace's sight */
        fprintf(stderr, "gmshim top: process %s writes %s, which cannot be opened here: %s\n", arg, *path,
                strerror(errno));
        free(*path);
        *path = NULL;
        return -1;
    }
    return 1;
}
