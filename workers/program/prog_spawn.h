/* prog_spawn.h - the last step of a sandbox's first process (a rank's, prog_rank.c; a replica's,
 * workers/replica_proc.c), in the child the worker forked, just before it becomes bwrap:
 * the given descriptors become 0, 1, 2, ... in order, every other descriptor is closed (whatever
 * the worker holds, Redis, sockets, stays out), signal mask and dispositions are reset, and argv
 * is executed with exactly env.  Async-signal-safe (the worker has threads). */
#ifndef GANTRY_PROGRAM_PROG_SPAWN_H
#define GANTRY_PROGRAM_PROG_SPAWN_H

/* returns only when it failed (then the caller _exits) */
void prog_spawn_exec(const int *fds, int n, const char *path, char **argv, char **env);

#endif
