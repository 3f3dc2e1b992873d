/* prog_rank.h - launching and supervising one rank of a team's program in its sandbox.
 *
 * prog_rank_start forks a child that joins the rank's control groups (prog_cgroup.h), sets
 * its rlimits, dies with the caller's thread (PR_SET_PDEATHSIG) and execs bwrap
 * (prog_sandbox.h) with exactly the environment described below, its arguments passed on a
 * file descriptor (bwrap --args: its command line, which the program sees as /proc/1/cmdline,
 * is "bwrap --args 4 -- /.gantry-init --uid=U ... -- PROGRAM ARGS") and the rank init's bytes on another (--ro-bind-data: no host
 * path); inside, the rank init (prog_rank_init.c) drops to the unprivileged uid and runs the program.  The caller then calls
 * prog_rank_poll until it says the rank ended: it moves the program's output into the rotated log (prog_logcap.h), enforces the
 * wall clock (and the memory limit when no cgroup does), and turns a prog_rank_terminate into SIGKILL once the grace period is
 * over.  Everything is the caller's thread: no thread, no signal handler.
 *
 * The rank's environment is exactly: PATH=/usr/local/bin:/usr/bin:/bin, HOME=/tmp,
 * LANG=C.UTF-8, then the caller's variables (which may replace those three), then
 * GANTRY_CHECKPOINT_DIR, GANTRY_OUTPUT_DIR and GANTRY_METRICS (the sandbox's paths:
 * prog_sandbox.h) and PWD (the workdir).  Nothing of the worker's own environment.
 *
 * Ending a rank: prog_rank_terminate sends SIGTERM to every process of the rank (all of
 * its pid namespace but bwrap's pid 1 and the rank init, which outlive the program
 * to report it), then prog_rank_poll sends SIGKILL to the namespace's pid 1 after grace_s,
 * which kills every process left (the kernel tears the namespace down).  prog_rank_free
 * does the same at once for a rank still running, and waits until no process of the
 * namespace is left. */
#ifndef GANTRY_PROGRAM_PROG_RANK_H
#define GANTRY_PROGRAM_PROG_RANK_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define PROG_RANK_DEFAULT_GRACE_S 30.0
#define PROG_RANK_DEFAULT_NOFILE 4096
#define PROG_RANK_NOBODY 65534u

typedef struct {
    const char *const *argv;       /* the program (argv[0] looked up on PATH inside when it has no '/') */
    const char *const *env;        /* NAME=VALUE, NULL-terminated (RANK, WORLD_SIZE, MASTER_ADDR, the spec's env...) */
    const char *workdir;           /* absolute: bound read-only at the same path, the program's cwd */
    const char *const *data_roots; /* NULL-terminated, absolute: bound read-only at the same paths */
    const char *checkpoint_dir;    /* existing directories outside, bound writable at PROG_SANDBOX_CHECKPOINT_DIR, */
    const char *output_dir;        /* PROG_SANDBOX_OUTPUT_DIR and PROG_SANDBOX_RUN_DIR; made the program's (chown) */
    const char *metrics_dir;       /* (the rank's own; its metrics file is metrics.jsonl there) */
    const char *log_dir;           /* rank-R.log and .1 (prog_logcap.h); never visible inside */
    int rank;
    long long memory_bytes;     /* 0: none */
    double cpus;                /* CPU time, in cores (a CFS quota in the rank's cgroup: prog_cgroup.h); 0: none */
    int max_procs;              /* processes (and threads) of the rank; 0: none */
    int max_open_files;         /* 0: PROG_RANK_DEFAULT_NOFILE */
    double max_runtime_s;       /* wall clock; 0: none */
    double grace_s;             /* SIGTERM -> SIGKILL; 0: PROG_RANK_DEFAULT_GRACE_S */
    long long log_cap;          /* bytes per log file; 0: PROG_LOGCAP_DEFAULT_CAP */
    long long tmp_bytes;        /* the private /tmp and /dev/shm each; 0: memory_bytes (0: not capped) */
    unsigned uid, gid;          /* 0: PROG_RANK_NOBODY; a worker gives each slot its own (--sandbox-uid) */
    const char *bwrap;          /* NULL: /usr/bin/bwrap */
    const char *init;           /* the gantry-rank-init binary (required) */
    const char *const *devices; /* NULL-terminated device nodes the rank may use (a GPU worker's /dev/nvidia*); NULL: none */
} prog_rank_spec;

typedef enum {
    PROG_RANK_RUNNING,
    PROG_RANK_EXITED,        /* code: its exit code */
    PROG_RANK_SIGNALED,      /* code: the signal that killed it (not ours) */
    PROG_RANK_MEMORY,        /* over memory_bytes (killed by the kernel's OOM killer, or by us) */
    PROG_RANK_RUNTIME,       /* over max_runtime_s: terminated by us */
    PROG_RANK_TERMINATED,    /* prog_rank_terminate (cancel, preemption, resize) */
    PROG_RANK_LAUNCH_FAILED, /* the sandbox or the program could not start: reason says why */
} prog_rank_end;

typedef struct {
    prog_rank_end end;
    int code;    /* exit code (PROG_RANK_EXITED) or signal (PROG_RANK_SIGNALED); for ends by us, what the program did */
    bool killed; /* SIGKILL was needed: the grace period ran out */
    double runtime_s;
    char reason[512]; /* one line: "exited with code 3", "memory limit of 256 MiB exceeded", ... */
} prog_rank_status;

typedef struct prog_rank prog_rank;

/* NULL with err naming the field or saying what failed (nothing left running) */
prog_rank *prog_rank_start(const prog_rank_spec *spec, char *err, size_t errlen);
/* Waits up to timeout_ms for output or the end; 1 when the rank has ended (its status
 * final), 0 while it runs. */
int prog_rank_poll(prog_rank *r, int timeout_ms);
/* prog_rank_poll until the end or timeout_s (< 0: forever); 1 ended, 0 still running */
int prog_rank_wait(prog_rank *r, double timeout_s);
/* SIGTERM now, SIGKILL after the grace period (prog_rank_poll); the end is PROG_RANK_TERMINATED */
void prog_rank_terminate(prog_rank *r);
const prog_rank_status *prog_rank_status_of(const prog_rank *r);
/* the sandbox's pid namespace (the inode of /proc/PID/ns/pid), 0 before it is known */
unsigned long long prog_rank_pidns(const prog_rank *r);
/* how memory is limited: "cgroup" or "rss polling (why)" */
const char *prog_rank_memory_mode(const prog_rank *r);
/* how CPU time is limited: "cgroup (1.50 cores)", "none" (none asked) or "none (why: no writable cpu controller)" */
const char *prog_rank_cpu_mode(const prog_rank *r);
/* CPU time the rank's processes used so far, microseconds; -1 without a cpu cgroup */
long long prog_rank_cpu_usage_us(const prog_rank *r);
/* kills what is left, waits until no process of the rank remains, frees */
void prog_rank_free(prog_rank *r);

/* the processes (outer pids) whose pid namespace is ns, up to max; how many there are */
int prog_rank_ns_pids(unsigned long long ns, pid_t *pids, int max);

#endif
