/* prog_sandbox.h - the bubblewrap command line a rank of a team's program runs under.
 *
 * Pure: builds an argv from a description and touches nothing (workers/program/prog_rank.c
 * looks at the machine, fills the description and runs the result).  What the
 * sandbox is:
 *   - nothing of the host but what is listed: the system paths (bound read-only at
 *     the same place when they exist: /usr and a few files of /etc, never /etc whole,
 *     never /), the merged-/usr links (/bin -> usr/bin ...), the read-only binds (the
 *     job's workdir, the tenant's data roots) and the writable ones (checkpoint,
 *     output and metrics directories), each at its own path;
 *   - a fresh /proc of its own pid namespace, a minimal /dev (null, zero, random,
 *     urandom, tty, full) plus the device nodes listed (a GPU worker's /dev/nvidia*),
 *     a private /tmp and /dev/shm (tmpfs, size-capped when asked; binds under /tmp
 *     are made inside the private one);
 *   - new pid, ipc and cgroup namespaces and a new session (no TIOCSTI into the
 *     worker's terminal); the network, the hostname and the user namespace are the
 *     host's (the ranks reach each other; bwrap runs as root, so the mounts need no
 *     unprivileged user namespace);
 *   - --die-with-parent: when the supervising bwrap goes, everything inside goes;
 *   - the rank init (workers/program/prog_rank_init.c) bound at PROG_SANDBOX_INIT runs first: it drops
 *     to uid/gid (never 0), no capabilities, no_new_privs, execs the program and
 *     reports its exact end on status_fd.
 * bwrap's pid 1 of the namespace reaps orphans; killing it (SIGKILL from outside)
 * kills every process of the rank. */
#ifndef GANTRY_PROGRAM_PROG_SANDBOX_H
#define GANTRY_PROGRAM_PROG_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>

/* where things are inside the sandbox */
#define PROG_SANDBOX_INIT "/.gantry-init"
#define PROG_SANDBOX_CHECKPOINT_DIR "/gantry/checkpoint"
#define PROG_SANDBOX_OUTPUT_DIR "/gantry/output"
#define PROG_SANDBOX_RUN_DIR "/gantry/run" /* the rank's own writable directory: its metrics file */
#define PROG_SANDBOX_METRICS_FILE PROG_SANDBOX_RUN_DIR "/metrics.jsonl"

typedef struct {
    const char *src; /* outside (a link's target, for links) */
    const char *dst; /* inside: absolute, no "." or ".." component, no repeated or trailing '/' */
} prog_sandbox_bind;

/* a file made inside from what an open fd holds (bwrap --ro-bind-data: a copy, read-only, mode
 * 0444): the sandbox sees the bytes, not the path or the owner of the file outside */
typedef struct {
    int fd; /* >= 3, inherited by bwrap (not close-on-exec) */
    const char *dst;
} prog_sandbox_data;

typedef struct {
    const char *bwrap;              /* the bwrap binary (absolute) */
    const char *const *system;      /* NULL-terminated: bound read-only at the same path when they exist */
    const prog_sandbox_bind *links; /* symbolic links made inside (merged /usr: {"usr/bin", "/bin"}) */
    size_t n_links;
    const prog_sandbox_bind *ro; /* read-only binds: the workdir, the data roots */
    size_t n_ro;
    const prog_sandbox_bind *rw; /* writable binds: checkpoint, output, metrics directories */
    size_t n_rw;
    const char *const *devices;    /* NULL-terminated device nodes bound at the same path (--dev-bind-try): a GPU's */
    const char *init;              /* the rank init binary outside; bound at PROG_SANDBOX_INIT (when init_fd is 0) */
    int init_fd;                   /* > 0: a descriptor bwrap reads the rank init's bytes from (--ro-bind-data): the
                                      init's host path shows nowhere inside (mountinfo); 0: init is bound */
    const char *cwd;               /* inside; absolute */
    long long tmp_bytes;           /* size of /tmp and of /dev/shm each; 0: not capped */
    unsigned uid, gid;             /* who the program runs as; 0 is refused */
    int status_fd;                 /* the rank init's report (prog_rank_init.c), >= 3 */
    int keep_fd;                   /* > 0: a descriptor the program inherits (a replica's request region) */
    const char *const *argv;       /* the program, NULL-terminated, at least argv[0] */
    const prog_sandbox_data *data; /* files copied in (a model replica's model) */
    size_t n_data;
    bool no_network; /* a network namespace of its own with only loopback (model replicas) */
    bool no_proc;    /* no /proc at all (model replicas: nothing there they need, and it names host paths) */
} prog_sandbox_desc;

/* A NULL-terminated malloc'd argv for execve, or NULL with err naming the field
 * that is wrong ("rw[1].dst: must be an absolute path").  Free with prog_sandbox_argv_free. */
char **prog_sandbox_argv(const prog_sandbox_desc *d, char *err, size_t errlen);
void prog_sandbox_argv_free(char **argv);

/* The system paths a Debian program needs read-only (NULL-terminated): /usr, the
 * dynamic loader's and the resolver's files, users and groups, certificates,
 * alternatives (BLAS), Python's configuration.  Not /etc whole: it holds the
 * deployment's secrets (worker.conf, tokens). */
extern const char *const prog_sandbox_default_system[];
/* the top-level names that are symbolic links into /usr on a merged-/usr system */
extern const char *const prog_sandbox_usr_links[];

#endif
