/* testpath.h - source_path("migrations"): a file or directory of the source tree, for the unit tests
 * (meson runs them with GANTRY_SOURCE_DIR set; "." when it is not).  The answer lives in a static
 * buffer until the next call. */
#ifndef GANTRY_TESTPATH_H
#define GANTRY_TESTPATH_H

#include <stdio.h>
#include <stdlib.h>

static inline const char *source_path(const char *rel)
{
    static char path[4096];
    const char *root = getenv("GANTRY_SOURCE_DIR");
    snprintf(path, sizeof path, "%s/%s", root ? root : ".", rel);
    return path;
}

#endif
