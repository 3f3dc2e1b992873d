#include "common/paths.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static bool has_dotdot(const char *p)
{
    for (const char *s = p; (s = strstr(s, "..")); s += 2)
        if ((s == p || s[-1] == '/') && (s[2] == '\0' || s[2] == '/')) return true;
    return false;
}

static bool under(const char *path, const char *root)
{
    size_t n = strlen(root);
    if (n == 1 && root[0] == '/') return true;
    return strncmp(path, root, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* realpath of p, or of its parent plus the last component when p does not exist and may not */
static int resolve(const char *p, bool must_exist, char *out)
{
    if (realpath(p, out)) return 0;
    if (must_exist || errno != ENOENT) return -1;
    char parent[PATH_MAX];
    snprintf(parent, sizeof(parent), "%s", p);
    char *slash = strrchr(parent, '/');
    if (!slash || slash[1] == '\0') return -1;
    const char *base = p + (slash - parent) + 1;
    if (slash == parent)
        snprintf(parent, sizeof(parent), "/");
    else
        *slash = '\0';
    char rp[PATH_MAX];
    if (!realpath(parent, rp)) return -1;
    if (snprintf(out, PATH_MAX, "%s/%s", strcmp(rp, "/") == 0 ? "" : rp, base) >= PATH_MAX) return -1;
    return 0;
}

int path_confine(const char *const *roots, int nroots, const char *requested, bool must_exist, char *out, size_t outlen, char *err,
                 size_t errlen)
{
    if (!requested || !requested[0]) {
        snprintf(err, errlen, "empty path");
        return -1;
    }
    if (nroots < 1) {
        snprintf(err, errlen, "this tenant has no data roots configured (an admin sets them with PATCH /v1/tenants/{id})");
        return -1;
    }
    if (has_dotdot(requested)) {
        snprintf(err, errlen, "'..' is not allowed in paths");
        return -1;
    }
    char joined[PATH_MAX], resolved[PATH_MAX];
    if (snprintf(joined, sizeof(joined), "%s%s%s", requested[0] == '/' ? "" : roots[0], requested[0] == '/' ? "" : "/",
                 requested) >= (int)sizeof(joined)) {
        snprintf(err, errlen, "path too long");
        return -1;
    }
    if (resolve(joined, must_exist, resolved) != 0) {
        snprintf(err, errlen, "%s does not exist or cannot be read", requested);
        return -1;
    }
    for (int i = 0; i < nroots; i++) {
        char root[PATH_MAX];
        if (!realpath(roots[i], root)) continue;
        if (under(resolved, root)) {
            if (snprintf(out, outlen, "%s", resolved) >= (int)outlen) break;
            return 0;
        }
    }
    snprintf(err, errlen, "%s is outside this tenant's data roots", requested);
    return -1;
}

int path_mkdirs(const char *path)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(buf, 0700) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    return mkdir(buf, 0700) != 0 && errno != EEXIST ? -1 : 0;
}
