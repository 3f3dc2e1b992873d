/* paths.h - confining paths named in job specs (datasets, checkpoints, outputs)
 * to a tenant's roots.  A relative path is taken under the first root.  Refused:
 * empty paths, any ".." component, and anything that resolves (symlinks
 * followed by realpath) outside every root.  A path that need not exist yet (an
 * output) is checked through its parent directory, which must exist. */
#ifndef GANTRY_PATHS_H
#define GANTRY_PATHS_H

#include <stdbool.h>
#include <stddef.h>

/* 0 with the resolved absolute path in out; -1 with a reason in err */
int path_confine(const char *const *roots, int nroots, const char *requested, bool must_exist, char *out, size_t outlen, char *err,
                 size_t errlen);

/* mkdir -p (mode 0700 for what it creates); 0 or -1 with errno */
int path_mkdirs(const char *path);

#endif
