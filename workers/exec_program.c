/* exec_program.c - a training job that runs the team's own program (spec.program,
 * spec/program_spec.h) instead of gantry's layer list: exec_training hands such a
 * spec here.  This file is the glue between the worker and the launcher of one rank
 * (workers/program/prog_rank.h); docs/programs.md says what a program sees.
 *
 * One worker runs one rank.  A job of N > 1 ranks (or an elastic one) is a gang: each
 * worker joins the generation's rendezvous (its rank and the world from there), rank 0
 * reserves a port on its advertised host and shares it (gang value "master_port"), and
 * every rank starts its program with the variables torch.distributed's env:// rendezvous
 * reads.  While the rank runs, the worker ships its new output to Redis
 * (workers/program_io.h), turns its metrics lines into points (rank 0's: the job's progress
 * and curves; another rank's: points marked with its rank), and stops
 * the rank (SIGTERM, SIGKILL after grace_s) when the job is cancelled, preempted or
 * resized, or when another rank of the generation ended badly.
 *
 * The end (docs/programs.md "Restarts and the failure rule"): each rank publishes its
 * end (gang value "end:R": "<prog_rank_end> <code> <reason>\n<its last log lines>"); rank 0
 * gathers every rank's end and decides for the generation by the worst cause:
 *   - every rank exited 0: succeeded, rank 0 reports the result (others EXEC_SILENT);
 *   - a memory or wall-clock limit, or a program that could not start: the job fails
 *     with that rank's last log lines (a restart would do the same);
 *   - a non-zero exit code, a rank killed by a signal gantry did not send, or a rank
 *     that never reported its end (its worker lost): the generation is aborted and the
 *     job restarts as its next generation from the checkpoint directory (EXEC_RETRY), up
 *     to max_restarts, as torchrun's elastic agent does; then it fails with that rank's
 *     exit code or signal and its last log lines.
 * A peer's death makes the other ranks' programs fail too (their collective calls
 * error), which is why the decision waits for every rank and ranks causes instead of
 * taking the first end it sees.  Cancel, preemption and resizes end every rank by
 * SIGTERM; the worker decides what follows (workers/main.c). */
#include "common/alloc.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/strv.h"
#include "workers/comm/sock.h"
#include "workers/executor.h"
#include "spec/serve_signature.h"
#include "workers/program/prog_logcap.h"
#include "workers/program/prog_metrics.h"
#include "workers/program/prog_netfence.h"
#include "workers/program/prog_rank.h"
#include "workers/program/prog_sandbox.h"
#include "spec/program_spec.h"
#include "workers/program_io.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define POLL_MS 200
#define WATCH_MS 500      /* how often a rank asks whether its peers ended */
#define GATHER_EXTRA_S 30 /* rank 0 waits grace_s + this for the other ranks' ends */
#define TAIL_LINES 20     /* of a failed rank's log, in the reason */
#define TAIL_BYTES 6000
#define MAX_OUTPUTS 1000 /* files listed in result.outputs */
#define BWRAP "/usr/bin/bwrap"
#define MAX_ROOTS 32 /* of the tenant's, bound into the sandbox */

/* how bad an end is: the generation's outcome is its worst rank's */
typedef enum {
    SEV_OK,         /* exited 0 */
    SEV_TERMINATED, /* stopped by us (a peer's end, cancel, preemption): no cause of its own */
    SEV_EXIT,       /* a non-zero exit code: restart, then the job fails with it */
    SEV_LOST,       /* killed by a signal we did not send, or never reported: restart */
    SEV_LAUNCH,     /* could not start: fails */
    SEV_RUNTIME,    /* the wall clock: fails */
    SEV_MEMORY,     /* the memory limit: fails */
} severity;

typedef struct {
    bool known;
    int end; /* prog_rank_end, or -1: lost (no end reported) */
    int code;
    char reason[512];
    char *tail; /* its last log lines (malloc'd) */
} rank_end;

typedef struct {
    exec_ctx *ctx;
    program_settings set;
    int rank, world, local_rank, local_world, generation;
    bool gang;
    char master_addr[RDV_ADDR_LEN];
    char peers[RDV_MAX_WORLD][RDV_ADDR_LEN]; /* every rank's host (the gang's rendezvous): the network fence's peers */
    int npeers;
    int master_port, port_fd;
    char dir[PATH_MAX], ckpt[PATH_MAX + 16], out[PATH_MAX + 16], logs[PATH_MAX + 16], run[PATH_MAX + 16];
    char workdir[PATH_MAX];
    /* the running rank */
    prog_rank *pr;
    prog_logcap_follow follow;
    char pending[PROGRAM_IO_CHUNK_MAX]; /* output read but not shipped: a line not finished yet */
    size_t npending;
    prog_metrics *met;
    json_t *merged; /* every metrics point of this generation merged: result.metrics */
    double fraction;
    bool terminating;
    bool fenced;        /* this slot's network chain holds the job's rules (back to idle at the end) */
    bool by_worker;     /* stopped because the worker said so (ctx->cancelled): the worker decides what follows */
    char stop_why[320]; /* why this rank was stopped (a peer's end, ...) */
    rank_end *ends;     /* world of them (rank 0 fills them) */
} prun;

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static severity severity_of(int end, int code)
{
    switch (end) {
    case PROG_RANK_EXITED:
        return code == 0 ? SEV_OK : SEV_EXIT;
    case PROG_RANK_TERMINATED:
        return SEV_TERMINATED;
    case PROG_RANK_MEMORY:
        return SEV_MEMORY;
    case PROG_RANK_RUNTIME:
        return SEV_RUNTIME;
    case PROG_RANK_LAUNCH_FAILED:
        return SEV_LAUNCH;
    default: /* PROG_RANK_SIGNALED, or lost */
        return SEV_LOST;
    }
}

/* --- where things are --- */

/* gantry-rank-init beside this worker's binary (the build directory's top level, or the installed bindir) */
static int find_init(char *out, size_t outlen)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0) return -1;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash) return -1;
    *slash = '\0';
    if (snprintf(out, outlen, "%s/gantry-rank-init", exe) >= (int)outlen) return -1;
    return access(out, X_OK);
}

/* a search's trial (spec.trial, server/search.h): its parameters also as a file, GANTRY_TRIAL_FILE
 * (<run>/trial.json, the sandbox's /gantry/run/trial.json), readable by the rank */
#define TRIAL_FILE "trial.json"
static int write_trial_file(prun *p, char *err, size_t errlen)
{
    const json_t *trial = json_object_get(p->ctx->task->spec, "trial");
    if (!trial) return 0;
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/" TRIAL_FILE, p->run);
    if (json_dump_file(trial, path, JSON_COMPACT) != 0 || chmod(path, 0644) != 0) {
        snprintf(err, errlen, "cannot write the trial's parameters to %.300s", path);
        return -1;
    }
    return 0;
}

/* the job's directories on this worker: <state>/jobs/<job>/{checkpoint,output,logs,run-R} */
static int make_dirs(prun *p, char *err, size_t errlen)
{
    snprintf(p->dir, sizeof(p->dir), "%s/jobs/%s", p->ctx->state_dir, p->ctx->task->job_id);
    snprintf(p->ckpt, sizeof(p->ckpt), "%s/checkpoint", p->dir);
    snprintf(p->out, sizeof(p->out), "%s/output", p->dir);
    snprintf(p->logs, sizeof(p->logs), "%s/logs", p->dir);
    snprintf(p->run, sizeof(p->run), "%s/run-%d", p->dir, p->rank);
    const char *dirs[] = {p->ckpt, p->out, p->logs, p->run};
    for (size_t i = 0; i < 4; i++)
        if (path_mkdirs(dirs[i]) != 0) {
            snprintf(err, errlen, "cannot create the job's directory %s: %s", dirs[i], strerror(errno));
            return -1;
        }
    /* this generation's metrics start empty: the reader returns every line of the file */
    char metrics[PATH_MAX + 32];
    snprintf(metrics, sizeof(metrics), "%s/metrics.jsonl", p->run);
    if (unlink(metrics) != 0 && errno != ENOENT) {
        snprintf(err, errlen, "cannot remove the last generation's metrics file %.300s: %s", metrics, strerror(errno));
        return -1;
    }
    return write_trial_file(p, err, errlen);
}

/* the task's roots (the tenant's, as the server published them) into roots[] (existing directories,
 * resolved); how many */
static int task_roots(const task_msg *t, char (*roots)[PATH_MAX], int max)
{
    int n = 0;
    size_t i;
    json_t *v;
    json_array_foreach(t->roots, i, v)
    {
        const char *s = json_string_value(v);
        struct stat st;
        if (n < max && s && realpath(s, roots[n]) && stat(roots[n], &st) == 0 && S_ISDIR(st.st_mode)) n++;
    }
    return n;
}

/* joins the gang: rank, world, local rank, MASTER_ADDR/PORT; 0, or -1 with err */
static int form_gang(prun *p, char *err, size_t errlen)
{
    exec_ctx *ctx = p->ctx;
    const char *host = ctx->advertise_host;
    int rdv_ms = p->set.rendezvous_timeout_s * 1000;
    p->rank = 0, p->world = 1, p->local_rank = 0, p->local_world = 1;
    snprintf(p->master_addr, sizeof(p->master_addr), "%s", host);
    if (p->gang) {
        rdv_members m;
        ctx->note(ctx, "waiting for the other workers of the gang");
        /* the elastic world (min != max) is the size the scheduler recorded at dispatch: 0 asks for it */
        int want = p->set.min_workers == p->set.max_workers ? p->set.min_workers : 0;
        if (ctx->rendezvous(ctx, want, host, rdv_ms, &m, err, errlen) != 0) return -1;
        p->rank = m.rank, p->world = m.world;
        snprintf(p->master_addr, sizeof(p->master_addr), "%s", m.addrs[0]);
        for (int r = 0; r < m.world && r < RDV_MAX_WORLD; r++)
            snprintf(p->peers[p->npeers++], RDV_ADDR_LEN, "%s", m.addrs[r]);
        p->local_world = 0;
        for (int r = 0; r < m.world; r++)
            if (strcmp(m.addrs[r], m.addrs[m.rank]) == 0) {
                if (r < m.rank) p->local_rank++;
                p->local_world++;
            }
    }
    char port[16];
    if (p->rank == 0) {
        /* a free TCP port on host for MASTER_PORT: a listening socket on port 0 (workers/comm/sock.h), and keep the socket until
         * just before the program starts.  Racy, as torchrun's own free-port helper is: between our close and the program's bind
         * (after it imports torch, seconds) another process may take the port; the kernel hands out ephemeral ports at random, so
         * that is rare, and the program's failure to bind is a non-zero exit, which restarts the generation.  Holding the socket
         * shortens the window to the program's start-up. */
        p->port_fd = sock_listen(host, &p->master_port, err, errlen);
        if (p->port_fd < 0) return -1;
        snprintf(port, sizeof(port), "%d", p->master_port);
        if (p->gang && ctx->gang_put(ctx, "master_port", port) != 0) {
            snprintf(err, errlen, "cannot share MASTER_PORT through the rendezvous (Redis unreachable)");
            return -1;
        }
    } else {
        if (ctx->gang_get(ctx, "master_port", rdv_ms, port, sizeof(port), err, errlen) != 0) return -1;
        p->master_port = atoi(port);
    }
    p->ends = xcalloc((size_t)p->world, sizeof(*p->ends));
    return 0;
}

/* --- the rank's environment --- */

extern char **environ;

/* NAME upper-cased: a trial parameter's variable */
static char *upper(const char *name)
{
    char *u = xstrdup(name);
    for (char *c = u; *c; c++)
        if (*c >= 'a' && *c <= 'z') *c = (char)(*c - 'a' + 'A');
    return u;
}

/* whether the trial's parameters set variable name (it then replaces the spec's env of that name) */
static bool trial_sets(const json_t *trial, const char *name)
{
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(trial, "params"), k, v)
    {
        char *u = upper(k);
        bool same = strcmp(u, name) == 0;
        free(u);
        if (same) return true;
    }
    return false;
}

/* a search's trial: GANTRY_SEARCH_ID, GANTRY_TRIAL_ID, GANTRY_TRIAL_PARAMS (JSON), GANTRY_TRIAL_FILE, the
 * budget (GANTRY_TRIAL_RESOURCE, GANTRY_TRIAL_MAX_RESOURCE, and GANTRY_TRIAL_MAX_EPOCHS when it counts
 * epochs), and each parameter as its name upper-cased (lr -> LR; strings as they are, numbers as JSON) */
static void trial_env(const json_t *trial, strv *env)
{
    if (!trial) return;
    strv_add(env, xasprintf("GANTRY_SEARCH_ID=%s", json_string_value(json_object_get(trial, "search"))));
    strv_add(env, xasprintf("GANTRY_TRIAL_ID=%lld", (long long)json_integer_value(json_object_get(trial, "index"))));
    char *params = json_dumps(json_object_get(trial, "params"), JSON_COMPACT);
    strv_add(env, xasprintf("GANTRY_TRIAL_PARAMS=%s", params ? params : "{}"));
    free(params);
    strv_add(env, xasprintf("GANTRY_TRIAL_FILE=%s/" TRIAL_FILE, PROG_SANDBOX_RUN_DIR));
    const char *resource = json_string_value(json_object_get(trial, "resource"));
    json_t *max = json_object_get(trial, "max_resource");
    if (resource) strv_add(env, xasprintf("GANTRY_TRIAL_RESOURCE=%s", resource));
    if (json_is_number(max)) {
        strv_add(env, xasprintf("GANTRY_TRIAL_MAX_RESOURCE=%g", json_number_value(max)));
        if (resource && strcmp(resource, "epoch") == 0)
            strv_add(env, xasprintf("GANTRY_TRIAL_MAX_EPOCHS=%g", json_number_value(max)));
    }
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(trial, "params"), k, v)
    {
        char *u = upper(k), *text = json_is_string(v) ? xstrdup(json_string_value(v)) : json_dumps(v, JSON_ENCODE_ANY);
        strv_add(env, xasprintf("%s=%s", u, text ? text : ""));
        free(u);
        free(text);
    }
}

static void build_env(const prun *p, strv *env)
{
    const exec_ctx *ctx = p->ctx;
    const json_t *trial = json_object_get(ctx->task->spec, "trial");
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)p->set.env, k, v) if (!trial_sets(trial, k))
        strv_add(env, xasprintf("%s=%s", k, json_string_value(v)));
    trial_env(trial, env);
    strv_add(env, xasprintf("RANK=%d", p->rank));
    strv_add(env, xasprintf("WORLD_SIZE=%d", p->world));
    strv_add(env, xasprintf("LOCAL_RANK=%d", p->local_rank));
    strv_add(env, xasprintf("LOCAL_WORLD_SIZE=%d", p->local_world));
    strv_add(env, xasprintf("MASTER_ADDR=%s", p->master_addr));
    strv_add(env, xasprintf("MASTER_PORT=%d", p->master_port));
    strv_add(env, xasprintf("GANTRY_JOB_ID=%s", ctx->task->job_id));
    strv_add(env, xasprintf("GANTRY_GENERATION=%d", p->generation));
    if (ctx->worker_kind && strcmp(ctx->worker_kind, "gpu") == 0) {
        /* a GPU worker is started with its GPU in CUDA_VISIBLE_DEVICES (deploy/up, the systemd unit);
         * the operator's NCCL_* settings (interfaces, transports) go to the program as they are */
        const char *gpu = getenv("CUDA_VISIBLE_DEVICES");
        strv_add(env, xasprintf("CUDA_VISIBLE_DEVICES=%s", gpu ? gpu : "0"));
        for (char **e = environ; *e; e++)
            if (strncmp(*e, "NCCL_", 5) == 0) strv_add(env, xstrdup(*e));
    }
}

/* The device nodes a GPU worker's rank uses (NVIDIA's driver): the control nodes and the worker's GPU
 * (CUDA_VISIBLE_DEVICES as an index; a UUID or a list binds every GPU node and CUDA_VISIBLE_DEVICES
 * still chooses).  Nodes that do not exist are skipped (--dev-bind-try).  A CPU worker: none.  Not
 * yet run on a GPU machine (docs/programs.md). */
#define MAX_DEVICES 20
static void gpu_devices(const exec_ctx *ctx, char (*names)[32], const char **out)
{
    int n = 0;
    if (ctx->worker_kind && strcmp(ctx->worker_kind, "gpu") == 0) {
        static const char *const control[] = {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset"};
        for (size_t i = 0; i < sizeof(control) / sizeof(control[0]); i++)
            snprintf(names[n++], 32, "/dev/%s", control[i]);
        const char *gpu = getenv("CUDA_VISIBLE_DEVICES");
        bool index = gpu && gpu[0] && strspn(gpu, "0123456789") == strlen(gpu) && strlen(gpu) < 8;
        if (index)
            snprintf(names[n++], 32, "/dev/nvidia%s", gpu);
        else
            for (int g = 0; n < MAX_DEVICES; g++)
                snprintf(names[n++], 32, "/dev/nvidia%d", g);
    }
    for (int i = 0; i < n; i++)
        out[i] = names[i];
    out[n] = NULL;
}

/* --- while it runs --- */

/* ships whole lines of new output (everything left when final) to the job's log stream */
static void ship_logs(prun *p, bool final)
{
    exec_ctx *ctx = p->ctx;
    for (int rounds = 0; rounds < 64; rounds++) {
        ssize_t n = prog_logcap_follow_read(&p->follow, p->pending + p->npending, sizeof(p->pending) - p->npending);
        if (n > 0) p->npending += (size_t)n;
        if (p->npending == 0) return;
        size_t send = p->npending;
        if (!final && p->npending < sizeof(p->pending)) { /* up to the last newline; a full buffer goes as it is */
            while (send > 0 && p->pending[send - 1] != '\n')
                send--;
        }
        if (send == 0) return;
        /* not written (rs_command logged why): those lines are missing from the stream, the log file has them */
        program_io_log_chunk(ctx->redis, ctx->task->job_id, p->rank, p->generation, p->pending, send);
        memmove(p->pending, p->pending + send, p->npending - send);
        p->npending -= send;
        if (n <= 0 && (!final || p->npending == 0)) return;
    }
}

/* "epoch 2: loss=0.31 test_accuracy=0.88" from a metrics point */
static void point_message(const json_t *pt, char *out, size_t outlen)
{
    size_t n = 0;
    const char *k;
    json_t *v;
    out[0] = '\0';
    if (json_is_number(json_object_get(pt, "epoch")))
        n += (size_t)snprintf(out, outlen, "epoch %g:", json_number_value(json_object_get(pt, "epoch")));
    json_object_foreach((json_t *)pt, k, v)
    {
        if (!json_is_number(v) || !strcmp(k, "epoch") || !strcmp(k, "rank") || n + 1 >= outlen) continue;
        n += (size_t)snprintf(out + n, outlen - n, "%s%s=%.6g", n ? " " : "", k, json_number_value(v));
    }
    if (n >= outlen) out[outlen - 1] = '\0';
}

/* how far a metrics line says the job is, from what it carries: "progress" (a fraction), else
 * "epoch" of "epochs", else "step" of "steps"; -1 when it says nothing (the program declared no
 * total: the job shows no progress rather than a false one) */
static double point_fraction(const json_t *pt)
{
    static const char *const pairs[][2] = {{"epoch", "epochs"}, {"step", "steps"}};
    json_t *pr = json_object_get(pt, "progress");
    if (json_is_number(pr) && json_number_value(pr) >= 0) return json_number_value(pr);
    for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
        json_t *n = json_object_get(pt, pairs[i][0]), *total = json_object_get(pt, pairs[i][1]);
        if (json_is_number(n) && json_is_number(total) && json_number_value(total) > 0 && json_number_value(n) >= 0)
            return json_number_value(n) / json_number_value(total);
    }
    return -1;
}

/* the rank's new metrics lines.  Rank 0's are the job's: progress points (the curves), merged into
 * result.metrics.  Another rank's are points of their own, with "rank": R (the server keeps them apart:
 * GET /v1/jobs/{id}/metrics?rank=R), which change neither the job's progress nor its result.  "rank" is
 * gantry's: a program's own member of that name is replaced. */
static void read_metrics(prun *p)
{
    json_t *points = json_array();
    char why[256];
    if (prog_metrics_read(p->met, points, why, sizeof(why)) < 0) {
        log_warn("job %s rank %d: metrics file: %s", p->ctx->task->job_id, p->rank, why);
    }
    size_t i;
    json_t *pt;
    json_array_foreach(points, i, pt)
    {
        char msg[256];
        if (p->rank != 0) {
            json_object_set_new(pt, "rank", json_integer(p->rank));
            char line[240];
            point_message(pt, line, sizeof(line));
            snprintf(msg, sizeof(msg), "rank %d: %s", p->rank, line);
            p->ctx->progress(p->ctx, -1.0, msg, pt); /* -1: no progress of the job */
            continue;
        }
        json_object_del(pt, "rank");
        double f = point_fraction(pt);
        if (f >= 0) p->fraction = f > 1 ? 1 : f;
        json_object_update(p->merged, pt);
        point_message(pt, msg, sizeof(msg));
        p->ctx->progress(p->ctx, p->fraction, msg, pt);
    }
    json_decref(points);
}

static void stop_rank(prun *p, const char *why)
{
    if (p->terminating) return;
    p->terminating = true;
    snprintf(p->stop_why, sizeof(p->stop_why), "%.*s", (int)sizeof(p->stop_why) - 1, why);
    log_info("job %s rank %d: stopping its program: %s", p->ctx->task->job_id, p->rank, why);
    prog_rank_terminate(p->pr);
}

/* parses a published end "<end> <code> <reason>\n<tail>" */
static void parse_end(const char *s, rank_end *e)
{
    int n = 0;
    e->known = true;
    if (sscanf(s, "%d %d %n", &e->end, &e->code, &n) < 2) {
        e->end = -1, e->code = 0;
        snprintf(e->reason, sizeof(e->reason), "reported an unreadable end");
        return;
    }
    const char *nl = strchr(s + n, '\n');
    snprintf(e->reason, sizeof(e->reason), "%.*s", nl ? (int)(nl - (s + n)) : (int)strlen(s + n), s + n);
    free(e->tail);
    e->tail = xstrdup(nl ? nl + 1 : "");
}

/* a gang's rank: whether another rank ended badly or the generation was aborted (stop_rank then) */
static void watch_peers(prun *p)
{
    exec_ctx *ctx = p->ctx;
    for (int r = 0; r < p->world && !p->terminating; r++) {
        if (r == p->rank || p->ends[r].known) continue;
        char field[32], val[8192], err[400];
        snprintf(field, sizeof(field), "end:%d", r);
        if (ctx->gang_get(ctx, field, 0, val, sizeof(val), err, sizeof(err)) == 0) {
            parse_end(val, &p->ends[r]);
            if (severity_of(p->ends[r].end, p->ends[r].code) != SEV_OK) {
                char why[700];
                snprintf(why, sizeof(why), "rank %d ended: %s", r, p->ends[r].reason);
                stop_rank(p, why);
            }
        } else if (strstr(err, "aborted")) {
            stop_rank(p, err);
        }
    }
}

/* runs the rank until its program ends; its status */
static const prog_rank_status *supervise(prun *p)
{
    exec_ctx *ctx = p->ctx;
    double next_watch = 0;
    for (;;) {
        int ended = prog_rank_poll(p->pr, POLL_MS);
        ship_logs(p, false);
        read_metrics(p);
        if (ended) break;
        if (p->terminating) continue; /* its grace period runs; prog_rank_poll sends SIGKILL at its end */
        if (ctx->cancelled(ctx)) {
            p->by_worker = true;
            stop_rank(p, "the job was cancelled, preempted, resized or ended elsewhere");
        } else if (p->gang && mono_s() >= next_watch) {
            next_watch = mono_s() + WATCH_MS / 1000.0;
            watch_peers(p);
        }
    }
    ship_logs(p, true);
    return prog_rank_status_of(p->pr);
}

/* --- the end --- */

static char *encode_end(int end, int code, const char *reason, const char *tail)
{
    return xasprintf("%d %d %s\n%s", end, code, reason, tail ? tail : "");
}

/* rank 0: every rank's end, waiting for the others until the deadline; false when stopped meanwhile */
static bool gather_ends(prun *p)
{
    exec_ctx *ctx = p->ctx;
    double deadline = mono_s() + p->set.grace_s + GATHER_EXTRA_S;
    for (int r = 1; r < p->world; r++) {
        if (p->ends[r].known) continue;
        char field[32], val[8192], err[400];
        snprintf(field, sizeof(field), "end:%d", r);
        int left_ms = (int)((deadline - mono_s()) * 1000);
        if (ctx->gang_get(ctx, field, left_ms > 0 ? left_ms : 0, val, sizeof(val), err, sizeof(err)) == 0) {
            parse_end(val, &p->ends[r]);
            continue;
        }
        if (ctx->cancelled(ctx)) return false;
        p->ends[r] = (rank_end){.known = true, .end = -1, .code = 0, .tail = xstrdup("")};
        snprintf(p->ends[r].reason, sizeof(p->ends[r].reason), "did not report its end (%s): its worker was lost", err);
    }
    return true;
}

/* the rank whose end decides the generation: the worst cause, the lowest rank among equals */
static int deciding_rank(const prun *p)
{
    int worst = 0;
    for (int r = 1; r < p->world; r++)
        if (severity_of(p->ends[r].end, p->ends[r].code) > severity_of(p->ends[worst].end, p->ends[worst].code)) worst = r;
    return worst;
}

/* "rank 1 exited with code 3" + note + its last lines, the most recent kept when they do not fit */
static void failure_reason(const prun *p, int r, const char *note, char *out, size_t outlen)
{
    const rank_end *e = &p->ends[r];
    severity sev = severity_of(e->end, e->code);
    int n = snprintf(out, outlen, sev == SEV_EXIT || sev == SEV_LOST ? "rank %d %s%s" : "rank %d: %s%s", r, e->reason, note);
    const char *tail = e->tail ? e->tail : "";
    size_t room = n >= 0 && (size_t)n + 40 < outlen ? outlen - (size_t)n - 40 : 0, len = strlen(tail);
    if (!len || !room) return;
    if (len > room) { /* the last lines that fit, from a line's start */
        const char *t = tail + len - room, *nl = strchr(t, '\n');
        tail = nl && nl[1] ? nl + 1 : t;
    }
    snprintf(out + n, outlen - (size_t)n, "; its last lines:\n%s", tail);
    size_t m = strlen(out);
    while (m > 0 && out[m - 1] == '\n')
        out[--m] = '\0';
}

/* what an earlier generation left in the checkpoint and output directories (written by other slots' uids, or
 * before umask 007) becomes the job group's and group-writable, so that whichever slot runs a rank now may
 * replace it; nftw has no argument for its callback: the gid in a static (one task at a time per worker) */
static gid_t share_gid;

static int share_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)ftw;
    if (type == FTW_SL || S_ISLNK(st->st_mode)) return 0; /* links are left alone (never followed) */
    if (lchown(path, (uid_t)-1, share_gid) != 0) return 0;
    mode_t want = S_ISDIR(st->st_mode) ? (st->st_mode & 07777) | 02070 : (st->st_mode & 07777) | 0060;
    if (want != (st->st_mode & 07777)) chmod(path, want);
    return 0;
}

static void share_dirs(const prun *p, gid_t gid)
{
    share_gid = gid;
    nftw(p->ckpt, share_one, 16, FTW_PHYS);
    nftw(p->out, share_one, 16, FTW_PHYS);
}

/* --- the result --- */

static int sha256_file(const char *path, char hex[65], long long *bytes)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return -1;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned char buf[65536], dig[EVP_MAX_MD_SIZE];
    unsigned dlen = 0;
    ssize_t n;
    int rc = md && EVP_DigestInit_ex(md, EVP_sha256(), NULL) == 1 ? 0 : -1;
    *bytes = 0;
    while (rc == 0 && (n = read(fd, buf, sizeof(buf))) > 0) {
        *bytes += n;
        if (EVP_DigestUpdate(md, buf, (size_t)n) != 1) rc = -1;
    }
    if (rc == 0 && (n < 0 || EVP_DigestFinal_ex(md, dig, &dlen) != 1)) rc = -1;
    EVP_MD_CTX_free(md);
    close(fd);
    for (unsigned i = 0; rc == 0 && i < dlen && i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", dig[i]);
    return rc;
}

/* nftw has no argument for its callback: the listing being made (one task at a time per worker) */
static struct {
    json_t *files;
    size_t base;
    bool truncated;
} listing;

static int list_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)ftw;
    if (type != FTW_F || !S_ISREG(st->st_mode)) return 0; /* regular files only: links are not followed */
    if (json_array_size(listing.files) >= MAX_OUTPUTS) {
        listing.truncated = true;
        return 1;
    }
    char hex[65] = "";
    long long bytes = 0;
    if (sha256_file(path, hex, &bytes) != 0) return 0;
    json_array_append_new(listing.files,
                          json_pack("{s:s, s:I, s:s}", "path", path + listing.base, "bytes", (json_int_t)bytes, "sha256", hex));
    return 0;
}

/* {"dir": the output directory, "files": [{"path","bytes","sha256"}], "truncated"?} */
static json_t *list_outputs(const char *dir)
{
    listing.files = json_array();
    listing.base = strlen(dir) + 1;
    listing.truncated = false;
    nftw(dir, list_one, 16, FTW_PHYS);
    json_t *o = json_pack("{s:s, s:o}", "dir", dir, "files", listing.files);
    if (listing.truncated) json_object_set_new(o, "truncated", json_true());
    listing.files = NULL;
    return o;
}

/* result.model for register_model: the output file, which must be a regular file in the output directory */
static json_t *model_of(const prun *p, char *err, size_t errlen)
{
    char path[PATH_MAX * 2], real[PATH_MAX], out_real[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s", p->out, p->set.register_output);
    struct stat st;
    if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode) || !realpath(path, real) || !realpath(p->out, out_real) ||
        !path_below(real, out_real)) {
        snprintf(err, errlen, "register_model.output: the program did not write %s as a regular file in GANTRY_OUTPUT_DIR",
                 p->set.register_output);
        return NULL;
    }
    json_t *model =
        json_pack("{s:s, s:{s:s, s:b}, s:s}", "artifact", real, "architecture", "format",
                  p->set.register_format ? p->set.register_format : "torchscript", "program", 1, "output", p->set.register_output);
    model_sig sig;
    char field[128], msg[256];
    const json_t *meta = p->set.register_metadata; /* checked at submission (spec/program_spec.c) */
    if (meta && sig_parse(meta, &sig, field, sizeof field, msg, sizeof msg) == 0) {
        json_object_set_new(model, "signature", sig_to_json(&sig));
        const char *desc = json_string_value(json_object_get(meta, "description"));
        if (desc) json_object_set_new(model, "description", json_string(desc));
    }
    return model;
}

/* result.exit_codes: each rank's exit code, null for a rank that did not exit by itself */
static json_t *exit_codes(const prun *p)
{
    json_t *codes = json_array();
    for (int r = 0; r < p->world; r++)
        json_array_append_new(codes, p->ends[r].end == PROG_RANK_EXITED ? json_integer(p->ends[r].code) : json_null());
    return codes;
}

static json_t *make_result(prun *p, int restarts, char *err, size_t errlen)
{
    json_t *codes = exit_codes(p);
    json_object_set_new(p->merged, "world_size", json_integer(p->world));
    json_object_set_new(p->merged, "restarts", json_integer(restarts));
    json_t *res = json_pack("{s:O, s:o, s:o}", "metrics", p->merged, "exit_codes", codes, "outputs", list_outputs(p->out));
    if (p->set.register_output) {
        json_t *model = model_of(p, err, errlen);
        if (!model) {
            json_decref(res);
            return NULL;
        }
        json_object_set_new(res, "model", model);
    }
    return res;
}

/* --- the executor --- */

static void prun_free(prun *p)
{
    if (p->pr) prog_rank_free(p->pr);
    char why[700];
    if (p->fenced && prog_netfence_idle(p->ctx->sandbox_uid, why, sizeof(why)) != 0)
        log_warn("job %s: this slot's network rules could not be reset: %s", p->ctx->task->job_id, why);
    p->fenced = false;
    if (p->port_fd >= 0) close(p->port_fd);
    prog_metrics_free(p->met);
    json_decref(p->merged);
    for (int r = 0; p->ends && r < p->world; r++)
        free(p->ends[r].tail);
    free(p->ends);
}

/* starts the rank's program; 0, or -1 with the launch failure as this rank's end */
static int launch(prun *p, char (*roots)[PATH_MAX], int nroots, const char *init, char *err, size_t errlen)
{
    strv argv = {0}, env = {0};
    size_t i;
    json_t *a;
    json_array_foreach(p->set.command, i, a) strv_add(&argv, xstrdup(json_string_value(a)));
    build_env(p, &env);
    const char *data_roots[MAX_ROOTS + 1];
    for (int r = 0; r < nroots; r++)
        data_roots[r] = roots[r];
    data_roots[nroots] = NULL;
    double runtime = (double)p->set.max_runtime_s;
    if (p->ctx->task->max_runtime_s > 0 && (runtime <= 0 || (double)p->ctx->task->max_runtime_s < runtime))
        runtime = (double)p->ctx->task->max_runtime_s; /* the tenant's; all generations together are the worker's check */
    char device_names[MAX_DEVICES][32];
    const char *devices[MAX_DEVICES + 1];
    gpu_devices(p->ctx, device_names, devices);
    /* CPU time: the spec's resources.cpus, at most the slot's share (--threads, else every core), which is the default */
    double cpus = p->ctx->threads > 0 ? (double)p->ctx->threads : 0;
    if (p->set.cpus > 0 && (cpus <= 0 || p->set.cpus < cpus)) cpus = p->set.cpus;
    /* the network: this slot's chain lets the rank reach its job's peers only (workers/program/prog_netfence.h) */
    if (p->ctx->net_fenced) {
        const char *peers[RDV_MAX_WORLD];
        for (int r = 0; r < p->npeers; r++)
            peers[r] = p->peers[r];
        char why[700];
        if (prog_netfence_job(p->ctx->sandbox_uid, p->ctx->task->job_id, peers, (size_t)p->npeers, why, sizeof(why)) != 0) {
            snprintf(err, errlen, "cannot fence the rank's network: %.500s", why);
            strv_free(&argv);
            strv_free(&env);
            return -1;
        }
        p->fenced = true;
    }
    prog_rank_spec spec = {.argv = (const char *const *)argv.v,
                           .env = (const char *const *)env.v,
                           .workdir = p->workdir,
                           .data_roots = data_roots,
                           .checkpoint_dir = p->ckpt,
                           .output_dir = p->out,
                           .metrics_dir = p->run,
                           .log_dir = p->logs,
                           .rank = p->rank,
                           .memory_bytes = p->set.memory_bytes,
                           .max_procs = p->set.processes,
                           .max_open_files = p->set.open_files,
                           .max_runtime_s = runtime,
                           .grace_s = p->set.grace_s,
                           .cpus = cpus,
                           .uid = p->ctx->sandbox_uid,
                           .gid = prog_netfence_job_gid(p->ctx->task->job_id),
                           .bwrap = BWRAP,
                           .devices = devices,
                           .init = init};
    share_dirs(p, prog_netfence_job_gid(p->ctx->task->job_id));
    if (p->port_fd >= 0) close(p->port_fd); /* MASTER_PORT is the program's to bind now */
    p->port_fd = -1;
    p->pr = prog_rank_start(&spec, err, errlen);
    strv_free(&argv);
    strv_free(&env);
    if (!p->pr) return -1;
    prog_logcap_follow_init(&p->follow, p->logs, p->rank);
    char metrics[PATH_MAX + 32];
    snprintf(metrics, sizeof(metrics), "%s/metrics.jsonl", p->run);
    p->met = prog_metrics_new(metrics, 0, 0);
    log_info("job %s: rank %d of %d started as uid %u (generation %d, memory limit by %s, CPU limit by %s, network %s)",
             p->ctx->task->job_id, p->rank, p->world, p->ctx->sandbox_uid, p->generation, prog_rank_memory_mode(p->pr),
             prog_rank_cpu_mode(p->pr), p->fenced ? "fenced to the job's peers" : "NOT fenced");
    return 0;
}

int exec_program(exec_ctx *ctx, json_t **result, char *err, size_t errlen)
{
    const task_msg *t = ctx->task;
    char field[160], msg[300], init[PATH_MAX];
    if (program_spec_validate(t->spec, field, sizeof(field), msg, sizeof(msg)) != 0) {
        snprintf(err, errlen, "%s: %s", field, msg);
        return EXEC_FAILED;
    }
    if (access(BWRAP, X_OK) != 0) {
        snprintf(err, errlen, "this worker cannot run programs: %s (Debian's bubblewrap) is not installed", BWRAP);
        return EXEC_FAILED;
    }
    if (find_init(init, sizeof(init)) != 0) {
        snprintf(err, errlen, "this worker cannot run programs: gantry-rank-init is not installed beside gantry-worker");
        return EXEC_FAILED;
    }
    if (!ctx->net_fenced && !ctx->net_open) {
        snprintf(err, errlen,
                 "this worker cannot run programs: it cannot fence their network to the job's peers (%s); the operator may "
                 "start it with --program-network open to run them with the host's network",
                 ctx->net_why ? ctx->net_why : "unknown");
        return EXEC_FAILED;
    }
    prun p = {.ctx = ctx, .port_fd = -1, .generation = t->attempt, .fraction = -1};
    program_settings_get(t->spec, t->max_memory_bytes, &p.set);
    p.gang = p.set.max_workers > 1;
    ctx->max_failures = p.set.max_restarts + 1; /* the requeue after EXEC_RETRY counts restarts against max_restarts */

    static char roots[MAX_ROOTS][PATH_MAX];
    int nroots = task_roots(t, roots, MAX_ROOTS);
    const char *rootv[MAX_ROOTS];
    for (int r = 0; r < nroots; r++)
        rootv[r] = roots[r];
    char why[600];
    if (nroots == 0 || path_confine_dir(rootv, nroots, p.set.workdir, p.workdir, sizeof(p.workdir), why, sizeof(why)) != 0) {
        snprintf(err, errlen, "spec.program.workdir: %s", nroots ? why : "none of the tenant's roots exists on this worker");
        return EXEC_FAILED;
    }

    if (form_gang(&p, why, sizeof(why)) != 0) {
        snprintf(err, errlen, "could not form the gang: %s", why);
        prun_free(&p);
        return EXEC_RETRY;
    }
    p.merged = json_object();
    if (p.rank == 0) {
        snprintf(msg, sizeof(msg), "generation %d: %d rank%s, MASTER_ADDR %s:%d; network %s", p.generation, p.world,
                 p.world == 1 ? "" : "s", p.master_addr, p.master_port,
                 ctx->net_fenced ? "fenced to the job's peers" : "NOT fenced (--program-network open)");
        ctx->note(ctx, msg);
    }

    /* run */
    rank_end *mine = &p.ends[p.rank];
    if (make_dirs(&p, why, sizeof(why)) != 0 || launch(&p, roots, nroots, init, why, sizeof(why)) != 0) {
        *mine = (rank_end){.known = true, .end = PROG_RANK_LAUNCH_FAILED, .code = -1, .tail = xstrdup("")};
        snprintf(mine->reason, sizeof(mine->reason), "%.*s", (int)sizeof(mine->reason) - 1, why);
    } else {
        const prog_rank_status *st = supervise(&p);
        *mine = (rank_end){
            .known = true, .end = (int)st->end, .code = st->code, .tail = prog_logcap_tail(p.logs, p.rank, TAIL_LINES, TAIL_BYTES)};
        snprintf(mine->reason, sizeof(mine->reason), "%s", st->reason);
    }
    log_info("job %s: rank %d ended: %s", t->job_id, p.rank, mine->reason);
    /* not written (logged): the logs miss the end line; the job's result still says it */
    program_io_log_end(ctx->redis, t->job_id, p.rank, p.generation, mine->reason);
    if (p.gang) {
        char fieldname[32], *val = encode_end(mine->end, mine->code, mine->reason, mine->tail);
        snprintf(fieldname, sizeof(fieldname), "end:%d", p.rank);
        if (ctx->gang_put(ctx, fieldname, val) != 0)
            log_warn("job %s: rank %d's end not published (Redis unreachable): rank 0 counts it lost", t->job_id, p.rank);
        free(val);
    }
    /* stopped by the worker (cancel, preemption, resize, a limit): the worker says what follows */
    if (p.by_worker) {
        snprintf(err, errlen, "stopped: %s", mine->reason);
        prun_free(&p);
        return EXEC_RETRY;
    }
    if (p.rank != 0) { /* rank 0 decides for the generation */
        prun_free(&p);
        return EXEC_SILENT;
    }
    if (p.gang && !gather_ends(&p)) {
        snprintf(err, errlen, "stopped while gathering the ranks' ends");
        prun_free(&p);
        return EXEC_RETRY;
    }
    int dr = deciding_rank(&p);
    severity sev = severity_of(p.ends[dr].end, p.ends[dr].code);
    int restarts = program_io_restarts(ctx->redis, t->job_id);
    if (restarts < 0) restarts = 0; /* Redis away: counted as none; the requeue's own count still stops it */
    int rc = EXEC_FAILED;
    if (sev == SEV_OK) {
        *result = make_result(&p, restarts, err, errlen);
        rc = *result ? EXEC_OK : EXEC_FAILED;
    } else if (sev == SEV_LOST || sev == SEV_TERMINATED || sev == SEV_EXIT) {
        /* restarted from the checkpoint up to max_restarts, as torchrun's elastic agent does: a lost rank, a
         * generation stopped, and a non-zero exit too (a transient error: a full disk, a peer's port taken);
         * the last failure is the job's, with its exit code and last lines */
        char cause[700];
        if (sev == SEV_TERMINATED)
            snprintf(cause, sizeof(cause), "the generation was stopped (%s)", p.stop_why[0] ? p.stop_why : p.ends[dr].reason);
        else
            snprintf(cause, sizeof(cause), "rank %d %s", dr, p.ends[dr].reason);
        if (restarts < p.set.max_restarts) {
            snprintf(err, errlen, "%s; restarting from the checkpoint (restart %d of %d)", cause, restarts + 1, p.set.max_restarts);
            rc = EXEC_RETRY;
        } else {
            char note[64];
            snprintf(note, sizeof(note), " (no restarts left: %d of %d used)", restarts, p.set.max_restarts);
            failure_reason(&p, dr, note, err, errlen);
        }
    } else {
        failure_reason(&p, dr, "", err, errlen);
    }
    if (rc != EXEC_OK) { /* the failure's details: every rank's end and the deciding rank's last lines */
        *result = json_pack("{s:O, s:o, s:i, s:s}", "metrics", p.merged, "exit_codes", exit_codes(&p), "rank", dr, "log_tail",
                            p.ends[dr].tail ? p.ends[dr].tail : "");
        if (rc == EXEC_RETRY) json_decref(*result), *result = NULL;
    }
    prun_free(&p);
    return rc;
}
