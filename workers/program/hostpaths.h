/* hostpaths.h - what of the host a sandbox shows (sandbox.h's system list and links), as this host
 * has it: the read-only system paths given, plus the top-level names that are links into /usr on a
 * merged-/usr system (made as links inside) or real directories (bound read-only).  Looks at the
 * filesystem (lstat, readlink): the one place that does, for program ranks (rank.c) and model
 * replicas (workers/replica_proc.c) alike. */
#ifndef GANTRY_PROGRAM_HOSTPATHS_H
#define GANTRY_PROGRAM_HOSTPATHS_H

#include <stddef.h>

#include "workers/program/sandbox.h"

#define HOSTPATHS_MAX_LINKS 8

typedef struct {
    const char *system[48]; /* NULL-terminated: base, then the sbx_usr_links that are directories here */
    sbx_bind links[HOSTPATHS_MAX_LINKS];
    size_t n_links;
    char targets[HOSTPATHS_MAX_LINKS][256]; /* what links[i].src points into */
} hostpaths;

/* fills h from base (NULL-terminated, at most 40 paths) */
void hostpaths_get(hostpaths *h, const char *const *base);

#endif
