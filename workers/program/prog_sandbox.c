/* prog_sandbox.c - the bubblewrap argv (prog_sandbox.h).  Only strings: nothing is looked up. */
#include "workers/program/prog_sandbox.h"
#include "common/strv.h"

#include "common/alloc.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const prog_sandbox_default_system[] = {
    "/usr",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/host.conf",
    "/etc/hosts",
    "/etc/hostname",
    "/etc/resolv.conf",
    "/etc/gai.conf",
    "/etc/protocols",
    "/etc/services",
    "/etc/localtime",
    "/etc/ssl/certs",
    "/etc/ca-certificates",
    "/etc/mime.types",
    "/etc/os-release",
    "/etc/python3",
    "/etc/python3.11",
    NULL,
};

const char *const prog_sandbox_usr_links[] = {"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", NULL};

/* inside paths nothing may be bound over or under (binds under /tmp are fine: they
 * are made after the private /tmp, inside it) */
static const char *const reserved[] = {"/proc", "/dev", PROG_SANDBOX_INIT, NULL};

/* --perms 0755 --dir for each directory above dst but / and /tmp, once: bwrap would
 * make them 0700 (root's), and the program could not reach what is bound below */
static void parents(strv *a, const char *dst)
{
    char p[4096];
    snprintf(p, sizeof(p), "%s", dst);
    for (char *c = p + 1; (c = strchr(c, '/')); c++) {
        *c = '\0';
        bool seen = strcmp(p, "/tmp") == 0;
        for (size_t i = 0; i + 1 < a->n && !seen; i++)
            seen = strcmp(a->v[i], "--dir") == 0 && strcmp(a->v[i + 1], p) == 0;
        if (!seen) {
            strv_push(a, "--perms");
            strv_push(a, "0755");
            strv_push(a, "--dir");
            strv_push(a, p);
        }
        *c = '/';
    }
}

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* absolute, squashed, not "/" */
static bool clean_abs(const char *p)
{
    if (!p || p[0] != '/' || !p[1]) return false;
    for (const char *c = p; *c; c++) {
        if (*c != '/') continue;
        const char *n = c + 1;
        size_t len = strcspn(n, "/");
        if (len == 0) return false; /* "//" or trailing '/' */
        if ((len == 1 && n[0] == '.') || (len == 2 && n[0] == '.' && n[1] == '.')) return false;
    }
    return true;
}

/* p is root or below it */
static bool under(const char *p, const char *root)
{
    size_t n = strlen(root);
    return strncmp(p, root, n) == 0 && (p[n] == '\0' || p[n] == '/');
}

static int check_dst(const prog_sandbox_desc *d, const char *field, size_t i, const char *dst, char *err, size_t errlen)
{
    if (!clean_abs(dst))
        return fail(err, errlen, "%s[%zu].dst: must be an absolute path other than / with no '.', '..' or empty component", field,
                    i);
    for (const char *const *r = reserved; *r; r++)
        if (under(dst, *r) || under(*r, dst)) return fail(err, errlen, "%s[%zu].dst: %s is the sandbox's own", field, i, *r);
    for (const char *const *s = d->system; s && *s; s++)
        if (under(dst, *s)) return fail(err, errlen, "%s[%zu].dst: lies in the read-only system path %s", field, i, *s);
    return 0;
}

static int check(const prog_sandbox_desc *d, char *err, size_t errlen)
{
    if (!d->bwrap || d->bwrap[0] != '/') return fail(err, errlen, "bwrap: must be an absolute path");
    if (!d->init || d->init[0] != '/') return fail(err, errlen, "init: must be an absolute path");
    if (!d->argv || !d->argv[0] || !d->argv[0][0]) return fail(err, errlen, "argv: the program is missing");
    if (!clean_abs(d->cwd) && !(d->cwd && strcmp(d->cwd, "/") == 0)) return fail(err, errlen, "cwd: must be an absolute path");
    if (d->uid == 0 || d->gid == 0) return fail(err, errlen, "uid: the program never runs as root (uid and gid must not be 0)");
    if (d->status_fd < 3) return fail(err, errlen, "status_fd: must be 3 or more");
    if (d->init_fd < 0 || (d->init_fd > 0 && d->init_fd < 3)) return fail(err, errlen, "init_fd: must be 0 or 3 or more");
    if (d->tmp_bytes < 0) return fail(err, errlen, "tmp_bytes: must not be negative");
    for (const char *const *s = d->system; s && *s; s++)
        if (!clean_abs(*s)) return fail(err, errlen, "system: %s is not an absolute path", *s);
    for (size_t i = 0; d->devices && d->devices[i]; i++) /* device nodes only: never a directory of the host */
        if (!clean_abs(d->devices[i]) || strncmp(d->devices[i], "/dev/", 5) != 0 || strchr(d->devices[i] + 5, '/'))
            return fail(err, errlen, "devices[%zu]: must be a node directly in /dev", i);
    for (size_t i = 0; i < d->n_links; i++) {
        if (!d->links[i].src || !d->links[i].src[0]) return fail(err, errlen, "links[%zu].src: the target is missing", i);
        if (!clean_abs(d->links[i].dst)) return fail(err, errlen, "links[%zu].dst: must be an absolute path", i);
    }
    const struct {
        const char *field;
        const prog_sandbox_bind *b;
        size_t n;
    } sets[] = {{"ro", d->ro, d->n_ro}, {"rw", d->rw, d->n_rw}};
    for (size_t s = 0; s < 2; s++)
        for (size_t i = 0; i < sets[s].n; i++) {
            if (!sets[s].b[i].src || sets[s].b[i].src[0] != '/')
                return fail(err, errlen, "%s[%zu].src: must be an absolute path", sets[s].field, i);
            if (check_dst(d, sets[s].field, i, sets[s].b[i].dst, err, errlen) != 0) return -1;
        }
    for (size_t i = 0; i < d->n_data; i++) {
        if (d->data[i].fd < 3) return fail(err, errlen, "data[%zu].fd: must be 3 or more", i);
        if (check_dst(d, "data", i, d->data[i].dst, err, errlen) != 0) return -1;
    }
    return 0;
}

char **prog_sandbox_argv(const prog_sandbox_desc *d, char *err, size_t errlen)
{
    if (check(d, err, errlen) != 0) return NULL;
    strv a = {0};
    strv_push(&a, d->bwrap);
    /* namespaces and lifetime; the network, uts and user namespaces stay the host's */
    strv_push(&a, "--die-with-parent");
    strv_push(&a, "--new-session");
    strv_push(&a, "--unshare-pid");
    strv_push(&a, "--unshare-ipc");
    strv_push(&a, "--unshare-cgroup-try");
    if (d->no_network) {
        strv_push(&a, "--unshare-net");
        strv_push(&a, "--unshare-uts");
    }
    for (const char *const *s = d->system; s && *s; s++) {
        parents(&a, *s);
        strv_push(&a, "--ro-bind-try");
        strv_push(&a, *s);
        strv_push(&a, *s);
    }
    for (size_t i = 0; i < d->n_links; i++) {
        strv_push(&a, "--symlink");
        strv_push(&a, d->links[i].src);
        strv_push(&a, d->links[i].dst);
    }
    if (!d->no_proc) {
        strv_push(&a, "--proc");
        strv_push(&a, "/proc");
    } else { /* what libtorch's cpuinfo reads to size its thread pool: the processors, nothing of any process */
        const char *cpu[] = {"/proc/cpuinfo", "/sys/devices/system/cpu"};
        for (size_t i = 0; i < 2; i++) {
            parents(&a, cpu[i]);
            strv_push(&a, "--ro-bind-try");
            strv_push(&a, cpu[i]);
            strv_push(&a, cpu[i]);
        }
    }
    strv_push(&a, "--dev");
    strv_push(&a, "/dev");
    for (const char *const *dev = d->devices; dev && *dev; dev++) { /* after --dev: inside the new /dev */
        strv_push(&a, "--dev-bind-try");
        strv_push(&a, *dev);
        strv_push(&a, *dev);
    }
    const char *tmps[] = {"/tmp", "/dev/shm"};
    for (size_t i = 0; i < 2; i++) {
        if (d->tmp_bytes > 0) {
            strv_push(&a, "--size");
            strv_pushf(&a, "%lld", d->tmp_bytes);
        }
        strv_push(&a, "--perms");
        strv_push(&a, "1777");
        strv_push(&a, "--tmpfs");
        strv_push(&a, tmps[i]);
    }
    /* the directories above each bind: bwrap would make them 0700 (root's), so the
     * program could not reach its own directories */
    const prog_sandbox_bind *sets[] = {d->ro, d->rw};
    size_t counts[] = {d->n_ro, d->n_rw};
    for (size_t s = 0; s < 2; s++)
        for (size_t i = 0; i < counts[s]; i++)
            parents(&a, sets[s][i].dst);
    /* read-only first: a writable directory inside a read-only one stays writable */
    for (size_t i = 0; i < d->n_ro; i++) {
        strv_push(&a, "--ro-bind");
        strv_push(&a, d->ro[i].src);
        strv_push(&a, d->ro[i].dst);
    }
    for (size_t i = 0; i < d->n_rw; i++) {
        strv_push(&a, "--bind");
        strv_push(&a, d->rw[i].src);
        strv_push(&a, d->rw[i].dst);
    }
    for (size_t i = 0; i < d->n_data; i++) {
        strv_push(&a, "--perms");
        strv_push(&a, "0444");
        strv_push(&a, "--ro-bind-data");
        strv_pushf(&a, "%d", d->data[i].fd);
        strv_push(&a, d->data[i].dst);
    }
    if (d->init_fd > 0) {
        strv_push(&a, "--perms");
        strv_push(&a, "0555");
        strv_push(&a, "--ro-bind-data");
        strv_pushf(&a, "%d", d->init_fd);
    } else {
        strv_push(&a, "--ro-bind");
        strv_push(&a, d->init);
    }
    strv_push(&a, PROG_SANDBOX_INIT);
    strv_push(&a, "--chdir");
    strv_push(&a, d->cwd);
    strv_push(&a, "--");
    strv_push(&a, PROG_SANDBOX_INIT);
    strv_pushf(&a, "--uid=%u", d->uid);
    strv_pushf(&a, "--gid=%u", d->gid);
    strv_pushf(&a, "--status-fd=%d", d->status_fd);
    if (d->keep_fd > 0) strv_pushf(&a, "--keep-fd=%d", d->keep_fd);
    strv_push(&a, "--");
    for (const char *const *p = d->argv; *p; p++)
        strv_push(&a, *p);
    return a.v;
}

void prog_sandbox_argv_free(char **argv)
{
    strv_free_v(argv);
}
