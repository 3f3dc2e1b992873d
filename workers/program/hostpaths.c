/* hostpaths.c - the host's system paths and merged-/usr links for a sandbox (hostpaths.h) */
#include "workers/program/hostpaths.h"

#include <sys/stat.h>
#include <unistd.h>

void hostpaths_get(hostpaths *h, const char *const *base)
{
    size_t ns = 0;
    h->n_links = 0;
    for (const char *const *p = base; *p && ns < 40; p++)
        h->system[ns++] = *p;
    for (const char *const *p = sbx_usr_links; *p; p++) {
        struct stat st;
        if (lstat(*p, &st) != 0) continue;
        if (S_ISLNK(st.st_mode) && h->n_links < HOSTPATHS_MAX_LINKS) {
            char *t = h->targets[h->n_links];
            ssize_t len = readlink(*p, t, sizeof(h->targets[0]) - 1);
            if (len <= 0) continue;
            t[len] = '\0';
            h->links[h->n_links++] = (sbx_bind){t, *p};
        } else if (S_ISDIR(st.st_mode)) {
            h->system[ns++] = *p;
        }
    }
    h->system[ns] = NULL;
}
