/* A directory given for its logs: the operands with each directory replaced by its *.gmlog
 * files, for every command that takes a job's directory. */
#ifndef GM_RANKS_DIR_H
#define GM_RANKS_DIR_H

/* Operands with each directory replaced by the *.gmlog files in it (sorted). *out is malloc'd
 * (with the names it holds: ranks_args_free); -1 after a message when a directory cannot be read
 * or holds no log. */
int ranks_expand_args(int n, char *const *args, char ***out, int *nout);
void ranks_args_free(char **v, int n);

#endif
