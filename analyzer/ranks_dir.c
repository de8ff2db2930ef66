/* A job's logs given as a directory: every *.gmlog in it, sorted by name, for `gmshim report`
 * (ranks.h). A directory that cannot be read is said so, never skipped in silence. */
#include "ranks_dir.h"
#include "vec.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int push(char ***v, int *n, size_t *cap, char *s)
{
    if (!s)
        return -1;
    char **nv = *n < INT_MAX ? vec_grow(*v, cap, (size_t)*n + 1, sizeof *nv, 16) : NULL;
    if (!nv) {
        free(s);
        return -1;
    }
    *v = nv;
    (*v)[(*n)++] = s;
    return 0;
}

int ranks_expand_args(int n, char *const *args, char ***out, int *nout)
{
    char **v = NULL;
    int nv = 0;
    size_t cap = 0;
    for (int i = 0; i < n; i++) {
        struct stat st;
        if (stat(args[i], &st) != 0 || !S_ISDIR(st.st_mode)) {
            if (push(&v, &nv, &cap, strdup(args[i])))
                goto oom;
            continue;
        }
        DIR *d = opendir(args[i]);
        if (!d) {
            fprintf(stderr, "gmshim: %s: %s\n", args[i], strerror(errno));
            ranks_args_free(v, nv);
            return -1;
        }
        int from = nv;
        struct dirent *e;
        while ((e = readdir(d))) {
            size_t len = strlen(e->d_name);
            if (len < 7 || strcmp(e->d_name + len - 6, ".gmlog"))
                continue;
            size_t plen = strlen(args[i]) + len + 2;
            char *p = malloc(plen);
            if (p)
                snprintf(p, plen, "%s%s%s", args[i], args[i][strlen(args[i]) - 1] == '/' ? "" : "/", e->d_name);
            if (push(&v, &nv, &cap, p)) {
                closedir(d);
                goto oom;
            }
        }
        closedir(d);
        if (nv == from) {
            fprintf(stderr, "gmshim: %s: a directory without *.gmlog files\n", args[i]);
            ranks_args_free(v, nv);
            return -1;
        }
        qsort(v + from, (size_t)(nv - from), sizeof *v, by_name);
    }
    *out = v;
    *nout = nv;
    return 0;
oom:
    fputs("gmshim: out of memory\n", stderr);
    ranks_args_free(v, nv);
    return -1;
}

void ranks_args_free(char **v, int n)
{
    for (int i = 0; i < n; i++)
        free(v[i]);
    free(v);
}
