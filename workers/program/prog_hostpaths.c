/* prog_hostpaths.c - the host's system paths and merged-/usr links for a sandbox (prog_hostpaths.h) */
#include "workers/program/prog_hostpaths.h"

#include <sys/stat.h>
#include <unistd.h>

void prog_hostpaths_get(prog_hostpaths *h, const char *const *base)
{
    size_t ns = 0;
    h->n_links = 0;
    for (const char *const *p = base; *p && ns < 40; p++)
        h->system[ns++] = *p;
    for (const char *const *p = prog_sandbox_usr_links; *p; p++) {
        struct stat st;
        if (lstat(*p, &st) != 0) continue;
        if (S_ISLNK(st.st_mode) && h->n_links < PROG_HOSTPATHS_MAX_LINKS) {
            char *t = h->targets[h->n_links];
            ssize_t len = readlink(*p, t, sizeof(h->targets[0]) - 1);
            if (len <= 0) continue;
            t[len] = '\0';
            h->links[h->n_links++] = (prog_sandbox_bind){t, *p};
        } else if (S_ISDIR(st.st_mode)) {
            h->system[ns++] = *p;
        }
    }
    h->system[ns] = NULL;
}
