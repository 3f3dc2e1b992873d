/* prog_rank.c - one rank of a team's program: launched in its sandbox, supervised (prog_rank.h). */
#include "workers/program/prog_rank.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <dirent.h>
#include <time.h>
#include <unistd.h>

#include "common/alloc.h"
#include "workers/program/prog_cgroup.h"
#include "workers/program/prog_hostpaths.h"
#include "workers/program/prog_logcap.h"
#include "workers/program/prog_sandbox.h"
#include "workers/program/prog_spawn.h"

#define STATUS_FD 3
#define ARGS_FD 4 /* bwrap's options, NUL-separated (--args): its command line shows no host path */
#define ARGS_FD_TEXT "4"
#define INIT_FD 5 /* the rank init's bytes (--ro-bind-data): no host path of it inside */
#define RSS_PERIOD_S 0.2

typedef enum { CAUSE_NONE, CAUSE_TERMINATE, CAUSE_RUNTIME, CAUSE_MEMORY } cause;

struct prog_rank {
    prog_rank_spec spec; /* limits only: the pointers are the caller's and not kept */
    char argv0[256];
    char pwd[4200];
    pid_t bwrap; /* our child */
    int out_fd, status_fd;
    prog_logcap *log;
    prog_cgroup *cg;
    char mem_mode[300];
    char cpu_mode[300];
    double t0, term_at, kill_at, rss_at;
    cause cause;
    bool started, out_eof, status_eof, reaped, killed;
    int exec_errno;             /* from "exec E" */
    int prog_exit, prog_signal; /* -1 until reported */
    int bwrap_status;
    long long rss_peak;
    unsigned long long ns;
    char status_line[64];
    size_t status_len;
    prog_rank_status st;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return NULL;
}

/* --- processes of a pid namespace, from /proc --- */

static unsigned long long ns_of(pid_t pid)
{
    char p[64], link[64];
    snprintf(p, sizeof(p), "/proc/%d/ns/pid", (int)pid);
    ssize_t n = readlink(p, link, sizeof(link) - 1);
    if (n <= 0) return 0;
    link[n] = '\0';
    unsigned long long ino = 0;
    return sscanf(link, "pid:[%llu]", &ino) == 1 ? ino : 0;
}

/* the pid inside its own namespace (the last NSpid field), -1 if gone */
static long inner_pid(pid_t pid)
{
    char p[64], line[256];
    snprintf(p, sizeof(p), "/proc/%d/status", (int)pid);
    FILE *f = fopen(p, "re");
    if (!f) return -1;
    long inner = -1;
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, "NSpid:", 6) != 0) continue;
        for (char *save = NULL, *t = strtok_r(line + 6, " \t\n", &save); t; t = strtok_r(NULL, " \t\n", &save))
            inner = strtol(t, NULL, 10);
        break;
    }
    fclose(f);
    return inner;
}

int prog_rank_ns_pids(unsigned long long ns, pid_t *pids, int max)
{
    if (ns == 0) return 0;
    DIR *d = opendir("/proc");
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end || pid <= 0) continue;
        if (ns_of((pid_t)pid) != ns) continue;
        if (n < max) pids[n] = (pid_t)pid;
        n++;
    }
    closedir(d);
    return n;
}

/* the namespace's pid 1: bwrap's child */
static pid_t ns_init(const prog_rank *r)
{
    pid_t pids[64];
    int n = prog_rank_ns_pids(r->ns, pids, 64);
    for (int i = 0; i < n && i < 64; i++)
        if (inner_pid(pids[i]) == 1) return pids[i];
    return -1;
}

static void find_ns(prog_rank *r)
{
    if (r->ns) return;
    /* bwrap's children: the one in another pid namespace is the sandbox's pid 1 */
    unsigned long long ours = ns_of(getpid());
    DIR *d = opendir("/proc");
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) && !r->ns) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end || pid <= 0) continue;
        char p[64], buf[512];
        snprintf(p, sizeof(p), "/proc/%ld/stat", pid);
        FILE *f = fopen(p, "re");
        if (!f) continue;
        size_t len = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[len] = '\0';
        char *rp = strrchr(buf, ')'); /* "pid (comm) S ppid ..." */
        int ppid = 0;
        if (!rp || sscanf(rp + 2, "%*c %d", &ppid) != 1 || ppid != r->bwrap) continue;
        unsigned long long ns = ns_of((pid_t)pid);
        if (ns && ns != ours) r->ns = ns;
    }
    closedir(d);
}

static long long ns_rss(const prog_rank *r)
{
    pid_t pids[4096];
    int n = prog_rank_ns_pids(r->ns, pids, 4096);
    long long sum = 0;
    long page = sysconf(_SC_PAGESIZE);
    for (int i = 0; i < n && i < 4096; i++) {
        char p[64];
        snprintf(p, sizeof(p), "/proc/%d/statm", (int)pids[i]);
        FILE *f = fopen(p, "re");
        if (!f) continue;
        long long size, res;
        if (fscanf(f, "%lld %lld", &size, &res) == 2) sum += res * page;
        fclose(f);
    }
    return sum;
}

/* SIGTERM to every process of the rank but pid 1 and the rank init (they report the end) */
static void sigterm_tree(prog_rank *r)
{
    pid_t pids[4096];
    for (int pass = 0; pass < 3; pass++) { /* again for what forked meanwhile */
        int n = prog_rank_ns_pids(r->ns, pids, 4096);
        for (int i = 0; i < n && i < 4096; i++) {
            long inner = inner_pid(pids[i]);
            if (inner > 2) kill(pids[i], SIGTERM);
        }
    }
}

static void sigkill_all(prog_rank *r)
{
    if (r->killed) return;
    r->killed = true;
    pid_t init = ns_init(r);
    if (init > 0) kill(init, SIGKILL); /* the namespace goes with its pid 1 */
    if (!r->reaped) kill(r->bwrap, SIGKILL);
}

/* --- the start --- */

static bool valid_env(const char *kv)
{
    const char *eq = strchr(kv, '=');
    if (!eq || eq == kv) return false;
    for (const char *c = kv; c < eq; c++)
        if (!(*c == '_' || (*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || (c > kv && *c >= '0' && *c <= '9')))
            return false;
    return true;
}

/* the environment: defaults, the caller's (replacing by name), the sandbox's paths and
 * PWD (pwd: "PWD=<workdir>", which bwrap's --chdir sets anyway) */
static char **make_env(const prog_rank_spec *s, const char *pwd, char *err, size_t errlen)
{
    size_t n = 0;
    for (const char *const *e = s->env; e && *e; e++, n++)
        if (!valid_env(*e)) return fail(err, errlen, "env[%zu]: not NAME=VALUE with a name of letters, digits and '_'", n);
    const char *defaults[] = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "LANG=C.UTF-8"};
    const char *ours[] = {pwd, "GANTRY_CHECKPOINT_DIR=" PROG_SANDBOX_CHECKPOINT_DIR, "GANTRY_OUTPUT_DIR=" PROG_SANDBOX_OUTPUT_DIR,
                          "GANTRY_METRICS=" PROG_SANDBOX_METRICS_FILE};
    char **env = xcalloc(n + 8, sizeof(char *));
    size_t k = 0;
    const char *const *lists[] = {defaults, s->env, ours};
    size_t lens[] = {3, n, 4};
    for (int l = 0; l < 3; l++)
        for (size_t i = 0; i < lens[l]; i++) {
            const char *kv = lists[l][i];
            size_t name = (size_t)(strchr(kv, '=') - kv);
            size_t j = 0;
            while (j < k && !(strncmp(env[j], kv, name + 1) == 0)) /* same "NAME=" */
                j++;
            if (j == k) k++;
            env[j] = (char *)kv;
        }
    env[k] = NULL;
    return env;
}

static bool is_dir(const char *p)
{
    struct stat st;
    return p && p[0] == '/' && stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* the program's own directory: owned by its uid and group (the directory itself, not followed); shared ones
 * (checkpoint, output: every rank of the job on this machine writes there, each as its slot's uid) are
 * group-writable and setgid, so what any rank of the job makes there is the job group's */
static int give_dir(const char *path, unsigned uid, unsigned gid, bool shared)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return -1;
    int rc = fchown(fd, uid, gid);
    if (rc == 0 && shared) rc = fchmod(fd, 02770);
    close(fd);
    return rc;
}

static bool under_system(const char *p)
{
    for (const char *const *s = prog_sandbox_default_system; *s; s++) {
        size_t n = strlen(*s);
        if (strncmp(p, *s, n) == 0 && (p[n] == '\0' || p[n] == '/')) return true;
    }
    return false;
}

/* the sandbox's argv; the system list and links live in the caller's arrays */
static char **make_argv(const prog_rank_spec *s, prog_hostpaths *host, prog_sandbox_bind *ro, prog_sandbox_bind *rw, char *err,
                        size_t errlen)
{
    size_t nro = 0;
    prog_hostpaths_get(host, prog_sandbox_default_system);
    for (const char *const *p = s->data_roots; p && *p; p++)
        if (!under_system(*p)) ro[nro++] = (prog_sandbox_bind){*p, *p};
    if (!under_system(s->workdir)) ro[nro++] = (prog_sandbox_bind){s->workdir, s->workdir};
    rw[0] = (prog_sandbox_bind){s->checkpoint_dir, PROG_SANDBOX_CHECKPOINT_DIR};
    rw[1] = (prog_sandbox_bind){s->output_dir, PROG_SANDBOX_OUTPUT_DIR};
    rw[2] = (prog_sandbox_bind){s->metrics_dir, PROG_SANDBOX_RUN_DIR};
    prog_sandbox_desc d = {
        .bwrap = s->bwrap ? s->bwrap : "/usr/bin/bwrap",
        .system = host->system,
        .links = host->links,
        .n_links = host->n_links,
        .ro = ro,
        .n_ro = nro,
        .rw = rw,
        .n_rw = 3,
        .devices = s->devices,
        .init = s->init,
        .init_fd = INIT_FD,
        .cwd = s->workdir,
        .tmp_bytes = s->tmp_bytes > 0 ? s->tmp_bytes : s->memory_bytes,
        .uid = s->uid,
        .gid = s->gid,
        .status_fd = STATUS_FD,
        .argv = s->argv,
    };
    return prog_sandbox_argv(&d, err, errlen);
}

/* a sealed-size anonymous file holding len bytes of data, at offset 0; -1 with err */
static int data_memfd(const char *name, const char *data, size_t len, char *err, size_t errlen)
{
    int fd = memfd_create(name, MFD_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "memfd_create: %s", strerror(errno));
        return -1;
    }
    for (size_t off = 0; off < len;) {
        ssize_t n = write(fd, data + off, len - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            snprintf(err, errlen, "cannot write bwrap's %s: %s", name, strerror(errno));
            close(fd);
            return -1;
        }
        off += (size_t)n;
    }
    lseek(fd, 0, SEEK_SET);
    return fd;
}

/* bwrap's arguments (argv[1]...), each ended by a NUL: what --args reads */
static int args_memfd(char *const *args, char *err, size_t errlen)
{
    size_t len = 0;
    for (char *const *a = args; *a; a++)
        len += strlen(*a) + 1;
    char *data = xmalloc(len + 1), *p = data;
    for (char *const *a = args; *a; a++) {
        size_t n = strlen(*a) + 1;
        memcpy(p, *a, n);
        p += n;
    }
    int fd = data_memfd("bwrap-args", data, len, err, errlen);
    free(data);
    return fd;
}

/* a copy of the file at path (the rank init: bwrap copies it into the sandbox, so its host path shows nowhere) */
static int file_memfd(const char *path, char *err, size_t errlen)
{
    int in = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (in < 0 || fstat(in, &st) != 0 || st.st_size <= 0 || st.st_size > (64 << 20)) {
        snprintf(err, errlen, "init: cannot read %s: %s", path, in < 0 ? strerror(errno) : "not a regular file of 1 B to 64 MiB");
        if (in >= 0) close(in);
        return -1;
    }
    char *data = xmalloc((size_t)st.st_size);
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t n = read(in, data + got, (size_t)st.st_size - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += (size_t)n;
    }
    close(in);
    int fd = got == (size_t)st.st_size ? data_memfd("rank-init", data, got, err, errlen) : -1;
    if (got != (size_t)st.st_size) snprintf(err, errlen, "init: short read of %s", path);
    free(data);
    return fd;
}

static void child(const prog_rank *r, char **argv, char **env, int devnull, int out_w, int status_w, int args_fd, int init_fd,
                  pid_t parent)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    setsid();
    if (r->cg && prog_cgroup_join(r->cg) != 0) {
        static const char m[] = "gantry: cannot join the rank's cgroup\n";
        (void)!write(out_w, m, sizeof(m) - 1);
        _exit(127);
    }
    struct rlimit nofile = {(rlim_t)r->spec.max_open_files, (rlim_t)r->spec.max_open_files};
    setrlimit(RLIMIT_NOFILE, &nofile);
    struct rlimit core = {0, 0};
    setrlimit(RLIMIT_CORE, &core);
    if (r->spec.max_procs > 0 && !prog_cgroup_has_pids(r->cg)) {
        struct rlimit np = {(rlim_t)r->spec.max_procs, (rlim_t)r->spec.max_procs};
        setrlimit(RLIMIT_NPROC, &np);
    }
    const int fds[INIT_FD + 1] = {devnull, out_w, out_w, status_w, args_fd, init_fd};
    prog_spawn_exec(fds, INIT_FD + 1, r->spec.bwrap, argv, env);
    static const char m[] = "gantry: cannot run bwrap\n";
    (void)!write(2, m, sizeof(m) - 1);
    _exit(127);
}

prog_rank *prog_rank_start(const prog_rank_spec *s, char *err, size_t errlen)
{
    if (!s->argv || !s->argv[0] || !s->argv[0][0]) return fail(err, errlen, "argv: the program is missing");
    if (!is_dir(s->workdir)) return fail(err, errlen, "workdir: not an existing absolute directory");
    for (const char *const *p = s->data_roots; p && *p; p++)
        if (!is_dir(*p)) return fail(err, errlen, "data_roots[%ld]: not an existing absolute directory", (long)(p - s->data_roots));
    const struct {
        const char *name, *path;
    } dirs[] = {{"checkpoint_dir", s->checkpoint_dir},
                {"output_dir", s->output_dir},
                {"metrics_dir", s->metrics_dir},
                {"log_dir", s->log_dir}};
    for (size_t i = 0; i < 4; i++)
        if (!is_dir(dirs[i].path)) return fail(err, errlen, "%s: not an existing absolute directory", dirs[i].name);
    if (!s->init || access(s->init, X_OK) != 0) return fail(err, errlen, "init: the gantry-rank-init binary is missing");
    if (s->memory_bytes < 0 || s->max_procs < 0 || s->cpus < 0 || s->max_open_files < 0 || s->max_runtime_s < 0 || s->grace_s < 0 ||
        s->log_cap < 0 || s->tmp_bytes < 0)
        return fail(err, errlen, "limits: must not be negative");

    prog_rank *r = xcalloc(1, sizeof(*r));
    r->spec = *s;
    r->spec.uid = s->uid ? s->uid : PROG_RANK_NOBODY;
    r->spec.gid = s->gid ? s->gid : PROG_RANK_NOBODY;
    if (!r->spec.max_open_files) r->spec.max_open_files = PROG_RANK_DEFAULT_NOFILE;
    if (r->spec.grace_s <= 0) r->spec.grace_s = PROG_RANK_DEFAULT_GRACE_S;
    if (!r->spec.bwrap) r->spec.bwrap = "/usr/bin/bwrap";
    snprintf(r->argv0, sizeof(r->argv0), "%s", s->argv[0]);
    r->out_fd = r->status_fd = -1;
    r->prog_exit = r->prog_signal = -1;
    r->bwrap = -1;
    r->st.end = PROG_RANK_RUNNING;

    prog_hostpaths host;
    prog_sandbox_bind rw[3];
    size_t nroots = 0;
    for (const char *const *p = s->data_roots; p && *p; p++)
        nroots++;
    prog_sandbox_bind *ro = xcalloc(nroots + 1, sizeof(*ro));
    prog_rank_spec sp = r->spec;
    char **argv = make_argv(&sp, &host, ro, rw, err, errlen);
    snprintf(r->pwd, sizeof(r->pwd), "PWD=%s", s->workdir);
    char **env = argv ? make_env(s, r->pwd, err, errlen) : NULL;
    free(ro);
    int devnull = -1, outp[2] = {-1, -1}, stp[2] = {-1, -1}, args_fd = -1, init_fd = -1;
    char **exec_argv = NULL;
    if (!env) goto fail;
    for (size_t i = 0; i < 3; i++)
        if (give_dir(dirs[i].path, r->spec.uid, r->spec.gid, i < 2) != 0) {
            snprintf(err, errlen, "%s: cannot give it to uid %u: %s", dirs[i].name, r->spec.uid, strerror(errno));
            goto fail;
        }
    r->log = prog_logcap_open(s->log_dir, s->rank, s->log_cap);
    if (!r->log) {
        snprintf(err, errlen, "log_dir: cannot write rank-%d.log: %s", s->rank, strerror(errno));
        goto fail;
    }
    static unsigned seq;
    char name[96], why[256];
    snprintf(name, sizeof(name), "gantry-rank-%d-%u-%d", (int)getpid(), __atomic_fetch_add(&seq, 1, __ATOMIC_RELAXED), s->rank);
    if (s->memory_bytes > 0 || s->max_procs > 0 || s->cpus > 0) {
        r->cg = prog_cgroup_create(name, s->memory_bytes, s->max_procs, why, sizeof(why));
        if (s->memory_bytes <= 0)
            snprintf(r->mem_mode, sizeof(r->mem_mode), "none");
        else if (prog_cgroup_has_memory(r->cg))
            snprintf(r->mem_mode, sizeof(r->mem_mode), "cgroup");
        else
            snprintf(r->mem_mode, sizeof(r->mem_mode), "rss polling (%s)", why);
        if (s->cpus <= 0)
            snprintf(r->cpu_mode, sizeof(r->cpu_mode), "none");
        else if (prog_cgroup_set_cpu(r->cg, s->cpus, why, sizeof(why)) == 0)
            snprintf(r->cpu_mode, sizeof(r->cpu_mode), "cgroup (%.2f cores)", s->cpus);
        else
            snprintf(r->cpu_mode, sizeof(r->cpu_mode), "none (%s)", why);
    } else {
        snprintf(r->mem_mode, sizeof(r->mem_mode), "none");
        snprintf(r->cpu_mode, sizeof(r->cpu_mode), "none");
    }
    devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull < 0 || pipe2(outp, O_CLOEXEC) != 0 || pipe2(stp, O_CLOEXEC) != 0) {
        snprintf(err, errlen, "cannot make the rank's pipes: %s", strerror(errno));
        goto fail;
    }
    /* bwrap's options go on ARGS_FD; its command line keeps only the command (the rank init's, no host path) */
    size_t cmd = 1;
    while (argv[cmd] && strcmp(argv[cmd], "--") != 0)
        cmd++;
    size_t nargv = cmd;
    while (argv[nargv])
        nargv++;
    exec_argv = xcalloc(nargv - cmd + 4, sizeof(char *));
    exec_argv[0] = (char *)"bwrap"; /* the path is execve's: the sandbox's /proc/1/cmdline says "bwrap" */
    exec_argv[1] = (char *)"--args";
    exec_argv[2] = (char *)ARGS_FD_TEXT;
    for (size_t i = cmd; i < nargv; i++)
        exec_argv[3 + i - cmd] = argv[i];
    char *cut = argv[cmd];
    argv[cmd] = NULL; /* the options alone, for the memfd */
    args_fd = args_memfd(argv + 1, err, errlen);
    argv[cmd] = cut;
    if (args_fd < 0 || (init_fd = file_memfd(s->init, err, errlen)) < 0) goto fail;
    pid_t parent = getpid();
    r->t0 = now_s();
    r->bwrap = fork();
    if (r->bwrap < 0) {
        snprintf(err, errlen, "fork: %s", strerror(errno));
        goto fail;
    }
    if (r->bwrap == 0) child(r, exec_argv, env, devnull, outp[1], stp[1], args_fd, init_fd, parent);
    close(outp[1]);
    close(stp[1]);
    close(devnull);
    close(args_fd);
    close(init_fd);
    free(exec_argv);
    r->out_fd = outp[0];
    r->status_fd = stp[0];
    fcntl(r->out_fd, F_SETFL, O_NONBLOCK);
    fcntl(r->status_fd, F_SETFL, O_NONBLOCK);
    prog_sandbox_argv_free(argv);
    free(env);
    return r;
fail:
    for (int i = 0; i < 2; i++) {
        if (outp[i] >= 0) close(outp[i]);
        if (stp[i] >= 0) close(stp[i]);
    }
    if (devnull >= 0) close(devnull);
    if (args_fd >= 0) close(args_fd);
    if (init_fd >= 0) close(init_fd);
    free(exec_argv);
    prog_sandbox_argv_free(argv);
    free(env);
    prog_logcap_close(r->log);
    prog_cgroup_destroy(r->cg);
    free(r);
    return NULL;
}

/* --- supervision --- */

static void drain_out(prog_rank *r, size_t budget)
{
    char buf[65536];
    while (!r->out_eof && budget > 0) {
        ssize_t n = read(r->out_fd, buf, sizeof(buf));
        if (n > 0) {
            prog_logcap_write(r->log, buf, (size_t)n);
            budget = (size_t)n >= budget ? 0 : budget - (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n == 0) r->out_eof = true;
        break;
    }
}

static void status_line(prog_rank *r, const char *line)
{
    int v = 0;
    if (strcmp(line, "start 0") == 0)
        r->started = true;
    else if (sscanf(line, "exec %d", &v) == 1)
        r->exec_errno = v;
    else if (sscanf(line, "exit %d", &v) == 1)
        r->prog_exit = v;
    else if (sscanf(line, "signal %d", &v) == 1)
        r->prog_signal = v;
}

static void drain_status(prog_rank *r)
{
    char buf[256];
    while (!r->status_eof) {
        ssize_t n = read(r->status_fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) break;
        if (n == 0) {
            r->status_eof = true;
            break;
        }
        for (ssize_t i = 0; i < n; i++) {
            if (buf[i] == '\n') {
                r->status_line[r->status_len] = '\0';
                status_line(r, r->status_line);
                r->status_len = 0;
            } else if (r->status_len + 1 < sizeof(r->status_line)) {
                r->status_line[r->status_len++] = buf[i];
            }
        }
    }
}

static void begin_end(prog_rank *r, cause c)
{
    if (r->cause != CAUSE_NONE || r->reaped) return;
    r->cause = c;
    r->term_at = now_s();
    if (c == CAUSE_MEMORY) {
        sigkill_all(r);
        return;
    }
    r->kill_at = r->term_at + r->spec.grace_s;
    find_ns(r);
    sigterm_tree(r);
}

void prog_rank_terminate(prog_rank *r)
{
    begin_end(r, CAUSE_TERMINATE);
}

static void fmt_bytes(long long b, char *out, size_t outlen)
{
    if (b >= (1LL << 30) && b % (1LL << 30) == 0)
        snprintf(out, outlen, "%lld GiB", b >> 30);
    else if (b >= (1LL << 20))
        snprintf(out, outlen, "%.0f MiB", (double)b / (1 << 20));
    else
        snprintf(out, outlen, "%lld bytes", b);
}

/* the last line of the log, for a sandbox that did not start */
static void last_line(const prog_rank *r, char *out, size_t outlen)
{
    char *t = prog_logcap_tail(r->spec.log_dir, r->spec.rank, 1, 400);
    snprintf(out, outlen, "%s", t);
    out[strcspn(out, "\n")] = '\0';
    free(t);
}

static void what_program_did(const prog_rank *r, char *out, size_t outlen)
{
    if (r->prog_exit >= 0)
        snprintf(out, outlen, "exited with code %d", r->prog_exit);
    else if (r->prog_signal >= 0)
        snprintf(out, outlen, "killed by signal %d (%s)", r->prog_signal, strsignal(r->prog_signal));
    else
        snprintf(out, outlen, "killed with its sandbox");
}

static void finish(prog_rank *r)
{
    prog_rank_status *st = &r->st;
    st->runtime_s = now_s() - r->t0;
    st->killed = r->killed;
    st->code = r->prog_exit >= 0 ? r->prog_exit : r->prog_signal >= 0 ? r->prog_signal : -1;
    char did[160], lim[64];
    what_program_did(r, did, sizeof(did));
    long long ooms = prog_cgroup_oom_kills(r->cg);
    if (r->cause == CAUSE_MEMORY || (ooms > 0 && r->prog_exit != 0)) {
        st->end = PROG_RANK_MEMORY;
        fmt_bytes(r->spec.memory_bytes, lim, sizeof(lim));
        if (r->cause == CAUSE_MEMORY) {
            char peak[64];
            fmt_bytes(r->rss_peak, peak, sizeof(peak));
            snprintf(st->reason, sizeof(st->reason), "memory limit of %s exceeded (its processes reached %s resident): killed", lim,
                     peak);
        } else {
            snprintf(st->reason, sizeof(st->reason),
                     "memory limit of %s exceeded (the kernel's OOM killer killed %lld process%s): %s", lim, ooms,
                     ooms == 1 ? "" : "es", did);
        }
    } else if (!r->started || r->exec_errno) {
        st->end = PROG_RANK_LAUNCH_FAILED;
        if (r->exec_errno) {
            snprintf(st->reason, sizeof(st->reason), "cannot run %s in the sandbox: %s", r->argv0, strerror(r->exec_errno));
        } else {
            char line[420];
            last_line(r, line, sizeof(line));
            snprintf(st->reason, sizeof(st->reason), "the sandbox did not start (bwrap status %d): %s", r->bwrap_status, line);
        }
    } else if (r->cause == CAUSE_RUNTIME || r->cause == CAUSE_TERMINATE) {
        st->end = r->cause == CAUSE_RUNTIME ? PROG_RANK_RUNTIME : PROG_RANK_TERMINATED;
        char head[96];
        if (r->cause == CAUSE_RUNTIME)
            snprintf(head, sizeof(head), "wall-clock limit of %g s exceeded", r->spec.max_runtime_s);
        else
            snprintf(head, sizeof(head), "terminated");
        if (r->killed)
            snprintf(st->reason, sizeof(st->reason), "%s: SIGTERM, then SIGKILL after the %g s grace period", head,
                     r->spec.grace_s);
        else
            snprintf(st->reason, sizeof(st->reason), "%s: SIGTERM; it %s", head, did);
    } else if (r->prog_exit >= 0) {
        st->end = PROG_RANK_EXITED;
        snprintf(st->reason, sizeof(st->reason), "%s", did);
    } else {
        st->end = PROG_RANK_SIGNALED;
        if (r->prog_signal < 0) st->code = SIGKILL;
        snprintf(st->reason, sizeof(st->reason), "%s", did);
    }
}

static double next_deadline(const prog_rank *r)
{
    double t = 1e300;
    if (r->cause != CAUSE_NONE && !r->killed) t = r->kill_at;
    if (r->cause == CAUSE_NONE && r->spec.max_runtime_s > 0 && r->t0 + r->spec.max_runtime_s < t) t = r->t0 + r->spec.max_runtime_s;
    if (r->spec.memory_bytes > 0 && !prog_cgroup_has_memory(r->cg) && r->rss_at + RSS_PERIOD_S < t) t = r->rss_at + RSS_PERIOD_S;
    return t;
}

static void check_limits(prog_rank *r)
{
    double t = now_s();
    if (r->started && !r->ns) find_ns(r);
    if (r->cause == CAUSE_NONE && r->spec.max_runtime_s > 0 && t - r->t0 >= r->spec.max_runtime_s) begin_end(r, CAUSE_RUNTIME);
    if (r->spec.memory_bytes > 0 && !prog_cgroup_has_memory(r->cg) && r->ns && t - r->rss_at >= RSS_PERIOD_S) {
        r->rss_at = t;
        long long rss = ns_rss(r);
        if (rss > r->rss_peak) r->rss_peak = rss;
        if (rss > r->spec.memory_bytes) begin_end(r, CAUSE_MEMORY);
    }
    if (r->cause != CAUSE_NONE && !r->killed && t >= r->kill_at) sigkill_all(r);
}

int prog_rank_poll(prog_rank *r, int timeout_ms)
{
    if (r->st.end != PROG_RANK_RUNNING) return 1;
    double until = now_s() + timeout_ms / 1000.0;
    for (;;) {
        check_limits(r);
        int st;
        if (!r->reaped && waitpid(r->bwrap, &st, WNOHANG) == r->bwrap) {
            r->reaped = true;
            r->bwrap_status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        if (r->reaped) {
            /* everything inside died with the namespace: the pipes close at once */
            double stop = now_s() + 2.0;
            while ((!r->out_eof || !r->status_eof) && now_s() < stop) {
                struct pollfd p[2] = {{r->out_fd, POLLIN, 0}, {r->status_fd, POLLIN, 0}};
                poll(p, 2, 50);
                drain_out(r, 1 << 20);
                drain_status(r);
            }
            if (r->status_len) { /* a last line without '\n' */
                r->status_line[r->status_len] = '\0';
                status_line(r, r->status_line);
                r->status_len = 0;
            }
            finish(r);
            return 1;
        }
        double t = now_s(), deadline = next_deadline(r);
        double wait = (until < deadline ? until : deadline) - t;
        if (wait > 0.1) wait = 0.1; /* the child's end is seen by waitpid, not by poll */
        if (wait < 0) wait = 0;
        struct pollfd p[2] = {{r->out_fd, r->out_eof ? 0 : POLLIN, 0}, {r->status_fd, r->status_eof ? 0 : POLLIN, 0}};
        poll(p, 2, (int)(wait * 1000));
        drain_out(r, 1 << 20);
        drain_status(r);
        if (now_s() >= until) return 0;
    }
}

int prog_rank_wait(prog_rank *r, double timeout_s)
{
    double until = now_s() + timeout_s;
    while (prog_rank_poll(r, 200) == 0)
        if (timeout_s >= 0 && now_s() >= until) return 0;
    return 1;
}

const prog_rank_status *prog_rank_status_of(const prog_rank *r)
{
    return &r->st;
}

unsigned long long prog_rank_pidns(const prog_rank *r)
{
    return r->ns;
}

const char *prog_rank_memory_mode(const prog_rank *r)
{
    return r->mem_mode;
}

const char *prog_rank_cpu_mode(const prog_rank *r)
{
    return r->cpu_mode;
}

long long prog_rank_cpu_usage_us(const prog_rank *r)
{
    return prog_cgroup_has_cpu(r->cg) ? prog_cgroup_cpu_usage_us(r->cg) : -1;
}

void prog_rank_free(prog_rank *r)
{
    if (!r) return;
    if (r->st.end == PROG_RANK_RUNNING && r->bwrap > 0) {
        find_ns(r);
        if (r->cause == CAUSE_NONE) r->cause = CAUSE_TERMINATE;
        sigkill_all(r);
        prog_rank_wait(r, -1);
    }
    /* the kernel kills the namespace's processes when its pid 1 dies; wait until it has */
    pid_t left[1];
    for (int i = 0; i < 200 && prog_rank_ns_pids(r->ns, left, 1) > 0; i++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (r->out_fd >= 0) close(r->out_fd);
    if (r->status_fd >= 0) close(r->status_fd);
    prog_logcap_close(r->log);
    prog_cgroup_destroy(r->cg);
    free(r);
}
