/* paths.c - paths in job specs confined to a tenant's roots (paths.h). */
#include "common/paths.h"
#include "common/alloc.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_ROOTS 16
#define MAX_HOPS 40 /* symbolic links followed (and roots re-entered) per path, as the kernel's ELOOP limit */

static bool has_dotdot(const char *p)
{
    for (const char *s = p; (s = strstr(s, "..")); s += 2)
        if ((s == p || s[-1] == '/') && (s[2] == '\0' || s[2] == '/')) return true;
    return false;
}

void path_squash(char *p)
{
    bool abs = p[0] == '/';
    char *w = p;
    for (const char *r = p; *r;) {
        while (*r == '/')
            r++;
        size_t len = strcspn(r, "/");
        if (len == 0 || (len == 1 && r[0] == '.')) {
            r += len;
            continue;
        }
        if (w > p || abs) *w++ = '/';
        memmove(w, r, len);
        w += len;
        r += len;
    }
    if (w == p && abs) *w++ = '/';
    *w = '\0';
}

const char *path_below(const char *path, const char *root)
{
    size_t n = strlen(root);
    if (n == 0 || path[0] != '/') return NULL;
    if (n == 1 && root[0] == '/') return path + 1;
    if (strncmp(path, root, n) != 0) return NULL;
    if (path[n] == '\0') return path + n;
    return path[n] == '/' ? path + n + 1 : NULL;
}

typedef struct {
    char real[MAX_ROOTS][PATH_MAX]; /* "" when the root does not resolve */
    char squashed[MAX_ROOTS][PATH_MAX];
    int n;
} root_set;

/* the root an absolute path lies under, lexically (as configured or as resolved): its index with
 * what is below it in *rest, or -1.  Nothing but the roots is looked at. */
static int enter(const root_set *rs, const char *path, const char **rest)
{
    for (int i = 0; i < rs->n; i++) {
        if (!rs->real[i][0]) continue;
        if ((*rest = path_below(path, rs->real[i])) || (*rest = path_below(path, rs->squashed[i]))) return i;
    }
    return -1;
}

enum { WALK_OK, WALK_OUTSIDE, WALK_MISSING };

/* Resolves `rest` from the real directory `cur` (under root ri) one component at a
 * time.  Every lstat and readlink is of a name directly inside a directory already
 * known to be inside a root; a symbolic link or ".." that leads out of the roots is
 * refused before anything outside is touched. */
static int walk(const root_set *rs, int ri, char *cur, const char *start, bool must_exist)
{
    char rest[2 * PATH_MAX];
    if (snprintf(rest, sizeof(rest), "%s", start) >= (int)sizeof(rest)) return WALK_MISSING;
    int hops = 0;
    size_t pos = 0;
    for (;;) {
        while (rest[pos] == '/')
            pos++;
        if (!rest[pos]) return WALK_OK;
        size_t len = strcspn(rest + pos, "/");
        char name[NAME_MAX + 1];
        if (len > NAME_MAX) return WALK_MISSING;
        memcpy(name, rest + pos, len);
        name[len] = '\0';
        pos += len;
        const char *after = rest + pos; /* "" or "/..." */
        bool last = after[strspn(after, "/")] == '\0';
        if (strcmp(name, ".") == 0) continue;
        if (strcmp(name, "..") == 0) {
            if (strcmp(cur, rs->real[ri]) != 0) {
                char *slash = strrchr(cur, '/');
                slash == cur ? (void)(cur[1] = '\0') : (void)(*slash = '\0');
                continue;
            }
            if (strcmp(cur, "/") == 0) continue; /* "/.." is "/" */
            /* above the root: the rest, as an absolute path, must lie under a root again */
            char up[PATH_MAX], again[2 * PATH_MAX];
            snprintf(up, sizeof(up), "%s", cur);
            char *slash = strrchr(up, '/');
            slash == up ? (void)(up[1] = '\0') : (void)(*slash = '\0');
            if (++hops > MAX_HOPS || snprintf(again, sizeof(again), "%s%s", strcmp(up, "/") == 0 ? "" : up,
                                              after[0] ? after : "/") >= (int)sizeof(again))
                return WALK_OUTSIDE;
            path_squash(again);
            const char *below;
            if ((ri = enter(rs, again, &below)) < 0) return WALK_OUTSIDE;
            snprintf(cur, PATH_MAX, "%s", rs->real[ri]);
            memmove(rest, below, strlen(below) + 1);
            pos = 0;
            continue;
        }
        char cand[PATH_MAX];
        if (snprintf(cand, sizeof(cand), "%s/%s", strcmp(cur, "/") == 0 ? "" : cur, name) >= (int)sizeof(cand)) return WALK_MISSING;
        struct stat st;
        if (lstat(cand, &st) != 0) {
            if (errno == ENOENT && last && !must_exist) {
                snprintf(cur, PATH_MAX, "%s", cand);
                return WALK_OK;
            }
            return WALK_MISSING;
        }
        if (S_ISLNK(st.st_mode)) {
            char target[PATH_MAX], next[2 * PATH_MAX];
            ssize_t n = readlink(cand, target, sizeof(target) - 1);
            if (n <= 0 || ++hops > MAX_HOPS) return WALK_MISSING;
            target[n] = '\0';
            if (snprintf(next, sizeof(next), "%s%s", target, after) >= (int)sizeof(next)) return WALK_MISSING;
            if (target[0] == '/') {
                path_squash(next);
                const char *below;
                if ((ri = enter(rs, next, &below)) < 0) return WALK_OUTSIDE;
                snprintf(cur, PATH_MAX, "%s", rs->real[ri]);
                memmove(next, below, strlen(below) + 1);
            }
            memcpy(rest, next, strlen(next) + 1);
            pos = 0;
            continue;
        }
        if (!last && !S_ISDIR(st.st_mode)) return WALK_MISSING;
        snprintf(cur, PATH_MAX, "%s", cand);
    }
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
    if (strlen(requested) >= PATH_MAX) {
        snprintf(err, errlen, "path too long");
        return -1;
    }
    root_set *rs = xmalloc(sizeof(*rs));
    rs->n = nroots < MAX_ROOTS ? nroots : MAX_ROOTS;
    for (int i = 0; i < rs->n; i++) {
        snprintf(rs->squashed[i], PATH_MAX, "%s", roots[i]);
        path_squash(rs->squashed[i]);
        if (roots[i][0] != '/' || !realpath(roots[i], rs->real[i])) rs->real[i][0] = '\0';
    }
    char path[PATH_MAX], cur[PATH_MAX];
    snprintf(path, sizeof(path), "%s", requested);
    path_squash(path);
    const char *below = path;
    int ri = path[0] == '/' ? enter(rs, path, &below) : (rs->real[0][0] ? 0 : -1);
    int rc = WALK_OUTSIDE;
    if (ri >= 0) {
        snprintf(cur, sizeof(cur), "%s", rs->real[ri]);
        rc = walk(rs, ri, cur, below, must_exist);
    } else if (path[0] != '/') {
        rc = WALK_MISSING; /* relative, and the first root does not exist */
    }
    free(rs);
    if (rc == WALK_OK && snprintf(out, outlen, "%s", cur) < (int)outlen) return 0;
    if (rc == WALK_OUTSIDE)
        snprintf(err, errlen, "%s", PATH_OUTSIDE_ROOTS);
    else
        snprintf(err, errlen, "%s does not exist or cannot be read", requested);
    return -1;
}

int path_confine_dir(const char *const *roots, int nroots, const char *requested, char *out, size_t outlen, char *err,
                     size_t errlen)
{
    if (path_confine(roots, nroots, requested, true, out, outlen, err, errlen) != 0) return -1;
    struct stat st;
    if (stat(out, &st) == 0 && S_ISDIR(st.st_mode)) return 0; /* out is resolved: no link left in it */
    snprintf(err, errlen, "%s is not a directory", requested);
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

int path_default_state(const char *sub, char *out, size_t outlen)
{
    const char *xdg = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
    int n;
    if (geteuid() == 0)
        n = snprintf(out, outlen, "/var/lib/gantry");
    else if (xdg && xdg[0] == '/')
        n = snprintf(out, outlen, "%s/gantry", xdg);
    else if (home && home[0])
        n = snprintf(out, outlen, "%s/.local/state/gantry", home);
    else
        return -1;
    if (n < 0 || (size_t)n >= outlen) return -1;
    if (sub && sub[0]) {
        int m = snprintf(out + n, outlen - (size_t)n, "/%s", sub);
        if (m < 0 || (size_t)m >= outlen - (size_t)n) return -1;
    }
    return 0;
}
