/* paths.h - confining paths named in job specs (datasets, checkpoints, outputs)
 * to a tenant's roots.  A relative path is taken under the first root.  Refused:
 * empty paths, any ".." component, and anything outside every root.
 *
 * No answer depends on what lies outside the roots: whether a path is inside is
 * decided from the path's text and the roots alone (each root as configured and as
 * resolved by realpath), and only then is it looked up, one component at a time
 * from its root.  A symbolic link inside a root is followed only while where it
 * points stays under a root (decided the same way, before anything there is
 * touched).  So a path outside, a symbolic link out of a root, existing or not, all
 * get the same message, PATH_OUTSIDE_ROOTS; only a path inside may be told "does
 * not exist".  A path that need not exist yet (an output) is checked through its
 * parent directory, which must exist. */
#ifndef GANTRY_PATHS_H
#define GANTRY_PATHS_H

#include <stdbool.h>
#include <stddef.h>

#define PATH_OUTSIDE_ROOTS "the path is outside this tenant's data roots"

/* 0 with the resolved absolute path in out; -1 with a reason in err */
int path_confine(const char *const *roots, int nroots, const char *requested, bool must_exist, char *out, size_t outlen, char *err,
                 size_t errlen);

/* path_confine of a directory that must exist (a program's workdir): -1 with "... is not a
 * directory" in err when it resolves to anything else.  The server checks a spec with it at
 * submission and the worker again before it runs the job, with the roots the task carries. */
int path_confine_dir(const char *const *roots, int nroots, const char *requested, char *out, size_t outlen, char *err,
                     size_t errlen);

/* In place, from the text alone: repeated '/', "." components and a trailing '/'
 * removed ("" stays "", an absolute path stays at least "/"); ".." is kept. */
void path_squash(char *p);

/* What lies below root in an absolute path ("" for root itself), or NULL when path
 * is not root or under it; both squashed.  Lexical: the filesystem is not read. */
const char *path_below(const char *path, const char *root);

/* The default state directory of the daemons and deploy/up, outside any checkout and any working
 * directory: /var/lib/gantry for root, else $XDG_STATE_HOME/gantry (default ~/.local/state/gantry); sub
 * ("workers", or "" for none) appended.  0, or -1 when it does not fit in out (or HOME is unset). */
int path_default_state(const char *sub, char *out, size_t outlen);

/* mkdir -p (mode 0700 for what it creates); 0 or -1 with errno */
int path_mkdirs(const char *path);

#endif
