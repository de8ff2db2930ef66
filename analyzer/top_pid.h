/* `gmshim top PID`: the log of a running process (top_pid.c). */
#ifndef GMA_TOP_PID_H
#define GMA_TOP_PID_H

/* When `arg` names a process (digits, and no file of that name): 1 with *path its log (malloc'd),
 * or -1 after saying why on stderr (no such process, no log open). 0 when `arg` is no process id
 * (a log or a directory, left as it is). */
int top_pid_resolve(const char *arg, char **path);

#endif
