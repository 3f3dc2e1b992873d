/* prog_hostpaths.h - what of the host a sandbox shows (prog_sandbox.h's system list and links), as this host
 * has it: the read-only system paths given, plus the top-level names that are links into /usr on a
 * merged-/usr system (made as links inside) or real directories (bound read-only).  Looks at the
 * filesystem (lstat, readlink): the one place that does, for program ranks (prog_rank.c) and model
 * replicas (workers/replica_proc.c) alike. */
#ifndef GANTRY_PROGRAM_PROG_HOSTPATHS_H
#define GANTRY_PROGRAM_PROG_HOSTPATHS_H

#include <stddef.h>

#include "workers/program/prog_sandbox.h"

#define PROG_HOSTPATHS_MAX_LINKS 8

typedef struct {
    const char *system[48]; /* NULL-terminated: base, then the prog_sandbox_usr_links that are directories here */
    prog_sandbox_bind links[PROG_HOSTPATHS_MAX_LINKS];
    size_t n_links;
    char targets[PROG_HOSTPATHS_MAX_LINKS][256]; /* what links[i].src points into */
} prog_hostpaths;

/* fills h from base (NULL-terminated, at most 40 paths) */
void prog_hostpaths_get(prog_hostpaths *h, const char *const *base);

#endif
