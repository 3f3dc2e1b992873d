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
#include "workers/prog_run.h"

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
    prog_run r; /* the rank (workers/prog_run.h) */
    int world, local_rank, local_world;
    bool gang;
    char master_addr[RDV_ADDR_LEN];
    char peers[RDV_MAX_WORLD][RDV_ADDR_LEN]; /* every rank's host (the gang's rendezvous): the network fence's peers */
    const char *peerv[RDV_MAX_WORLD];
    int npeers;
    int master_port, port_fd;
    rank_end *ends; /* world of them (rank 0 fills them) */
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

/* a search's trial (spec.trial, server/search.h): its parameters also as a file, GANTRY_TRIAL_FILE
 * (<run>/trial.json, the sandbox's /gantry/run/trial.json), readable by the rank */
#define TRIAL_FILE "trial.json"
static int write_trial_file(prun *p, char *err, size_t errlen)
{
    const json_t *trial = json_object_get(p->r.ctx->task->spec, "trial");
    if (!trial) return 0;
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/" TRIAL_FILE, p->r.run);
    if (json_dump_file(trial, path, JSON_COMPACT) != 0 || chmod(path, 0644) != 0) {
        snprintf(err, errlen, "cannot write the trial's parameters to %.300s", path);
        return -1;
    }
    return 0;
}

/* joins the gang: rank, world, local rank, MASTER_ADDR/PORT; 0, or -1 with err */
static int form_gang(prun *p, char *err, size_t errlen)
{
    exec_ctx *ctx = p->r.ctx;
    const char *host = ctx->advertise_host;
    int rdv_ms = p->r.set.rendezvous_timeout_s * 1000;
    p->r.rank = 0, p->world = 1, p->local_rank = 0, p->local_world = 1;
    snprintf(p->master_addr, sizeof(p->master_addr), "%s", host);
    if (p->gang) {
        rdv_members m;
        ctx->note(ctx, "waiting for the other workers of the gang");
        /* the elastic world (min != max) is the size the scheduler recorded at dispatch: 0 asks for it */
        int want = p->r.set.min_workers == p->r.set.max_workers ? p->r.set.min_workers : 0;
        if (ctx->rendezvous(ctx, want, host, rdv_ms, &m, err, errlen) != 0) return -1;
        p->r.rank = m.rank, p->world = m.world;
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
    if (p->r.rank == 0) {
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
 * budget (GANTRY_TRIAL_RESOURCE, GANTRY_TRIAL_MAX_RESOURCE: where this run ends, and GANTRY_TRIAL_MAX_EPOCHS
 * when it counts epochs; with pause GANTRY_TRIAL_BUDGET_MAX and GANTRY_TRIAL_RUNG), and each parameter as its name upper-cased (lr
 * -> LR; strings as they are, numbers as JSON) */
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
    json_t *budget_max = json_object_get(trial, "budget_max"), *rung = json_object_get(trial, "rung");
    if (json_is_number(budget_max)) /* pause: max_resource is where this run ends, the rung it runs to */
        strv_add(env, xasprintf("GANTRY_TRIAL_BUDGET_MAX=%g", json_number_value(budget_max)));
    if (json_is_integer(rung)) strv_add(env, xasprintf("GANTRY_TRIAL_RUNG=%lld", (long long)json_integer_value(rung)));
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
    const exec_ctx *ctx = p->r.ctx;
    const json_t *trial = json_object_get(ctx->task->spec, "trial");
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)p->r.set.env, k, v) if (!trial_sets(trial, k))
        strv_add(env, xasprintf("%s=%s", k, json_string_value(v)));
    trial_env(trial, env);
    strv_add(env, xasprintf("RANK=%d", p->r.rank));
    strv_add(env, xasprintf("WORLD_SIZE=%d", p->world));
    strv_add(env, xasprintf("LOCAL_RANK=%d", p->local_rank));
    strv_add(env, xasprintf("LOCAL_WORLD_SIZE=%d", p->local_world));
    strv_add(env, xasprintf("MASTER_ADDR=%s", p->master_addr));
    strv_add(env, xasprintf("MASTER_PORT=%d", p->master_port));
    strv_add(env, xasprintf("GANTRY_JOB_ID=%s", ctx->task->job_id));
    strv_add(env, xasprintf("GANTRY_GENERATION=%d", p->r.generation));
    prog_run_device_env(ctx, env);
}
/* --- while it runs --- */
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
    exec_ctx *ctx = p->r.ctx;
    for (int r = 0; r < p->world && !p->r.terminating; r++) {
        if (r == p->r.rank || p->ends[r].known) continue;
        char field[32], val[8192], err[400];
        snprintf(field, sizeof(field), "end:%d", r);
        if (ctx->gang_get(ctx, field, 0, val, sizeof(val), err, sizeof(err)) == 0) {
            parse_end(val, &p->ends[r]);
            if (severity_of(p->ends[r].end, p->ends[r].code) != SEV_OK) {
                char why[700];
                snprintf(why, sizeof(why), "rank %d ended: %s", r, p->ends[r].reason);
                prog_run_stop(&p->r, why);
            }
        } else if (strstr(err, "aborted")) {
            prog_run_stop(&p->r, err);
        }
    }
}

/* runs the rank until its program ends (a gang's rank stopped when a peer ended badly); its status */
static const prog_rank_status *supervise(prun *p)
{
    double next_watch = 0;
    while (!prog_run_poll(&p->r, POLL_MS)) {
        /* stopping: its grace period runs (prog_run_poll sends SIGKILL at its end) */
        if (!p->r.terminating && p->gang && mono_s() >= next_watch) {
            next_watch = mono_s() + WATCH_MS / 1000.0;
            watch_peers(p);
        }
    }
    return prog_run_finish(&p->r);
}

/* --- the end --- */

static char *encode_end(int end, int code, const char *reason, const char *tail)
{
    return xasprintf("%d %d %s\n%s", end, code, reason, tail ? tail : "");
}

/* rank 0: every rank's end, waiting for the others until the deadline; false when stopped meanwhile */
static bool gather_ends(prun *p)
{
    exec_ctx *ctx = p->r.ctx;
    double deadline = mono_s() + p->r.set.grace_s + GATHER_EXTRA_S;
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

/* result.model for register_model: the output file, which must be a regular file in the output directory */
static json_t *model_of(const prun *p, char *err, size_t errlen)
{
    char path[PATH_MAX * 2], real[PATH_MAX], out_real[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s", p->r.out, p->r.set.register_output);
    struct stat st;
    if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode) || !realpath(path, real) || !realpath(p->r.out, out_real) ||
        !path_below(real, out_real)) {
        snprintf(err, errlen, "register_model.output: the program did not write %s as a regular file in GANTRY_OUTPUT_DIR",
                 p->r.set.register_output);
        return NULL;
    }
    json_t *model = json_pack("{s:s, s:{s:s, s:b}, s:s}", "artifact", real, "architecture", "format",
                              p->r.set.register_format ? p->r.set.register_format : "torchscript", "program", 1, "output",
                              p->r.set.register_output);
    model_sig sig;
    char field[128], msg[256];
    const json_t *meta = p->r.set.register_metadata; /* checked at submission (spec/program_spec.c) */
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
    json_object_set_new(p->r.merged, "world_size", json_integer(p->world));
    json_object_set_new(p->r.merged, "restarts", json_integer(restarts));
    json_t *res = json_pack("{s:O, s:o, s:o}", "metrics", p->r.merged, "exit_codes", codes, "outputs", prog_run_outputs(p->r.out));
    if (p->r.set.register_output) {
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
    prog_run_free(&p->r);
    if (p->port_fd >= 0) close(p->port_fd);
    p->port_fd = -1;
    for (int r = 0; p->ends && r < p->world; r++)
        free(p->ends[r].tail);
    free(p->ends);
    p->ends = NULL;
}

/* starts the rank's program with its gang's variables; 0, or -1 with the launch failure as this rank's end */
static int launch(prun *p, char *err, size_t errlen)
{
    strv env = {0};
    build_env(p, &env);
    for (int r = 0; r < p->npeers; r++)
        p->peerv[r] = p->peers[r];
    p->r.peers = p->peerv, p->r.npeers = p->npeers;
    if (p->port_fd >= 0) close(p->port_fd); /* MASTER_PORT is the program's to bind now */
    p->port_fd = -1;
    int rc = prog_run_launch(&p->r, &env, err, errlen);
    strv_free(&env);
    return rc;
}

int exec_program(exec_ctx *ctx, json_t **result, char *err, size_t errlen)
{
    const task_msg *t = ctx->task;
    char field[160], msg[300];
    if (program_spec_validate(t->spec, field, sizeof(field), msg, sizeof(msg)) != 0) {
        snprintf(err, errlen, "%s: %s", field, msg);
        return EXEC_FAILED;
    }
    prun p = {.port_fd = -1};
    if (prog_run_init(&p.r, ctx, t->spec, 0, err, errlen) != 0) {
        prun_free(&p);
        return EXEC_FAILED;
    }
    p.gang = p.r.set.max_workers > 1;
    ctx->max_failures = p.r.set.max_restarts + 1; /* the requeue after EXEC_RETRY counts restarts against max_restarts */
    char why[600];
    if (form_gang(&p, why, sizeof(why)) != 0) {
        snprintf(err, errlen, "could not form the gang: %s", why);
        prun_free(&p);
        return EXEC_RETRY;
    }
    if (p.r.rank == 0) {
        snprintf(msg, sizeof(msg), "generation %d: %d rank%s, MASTER_ADDR %s:%d; network %s", p.r.generation, p.world,
                 p.world == 1 ? "" : "s", p.master_addr, p.master_port,
                 ctx->net_fenced ? "fenced to the job's peers" : "NOT fenced (--program-network open)");
        ctx->note(ctx, msg);
    }

    /* run */
    rank_end *mine = &p.ends[p.r.rank];
    if (prog_run_dirs(&p.r, why, sizeof(why)) != 0 || write_trial_file(&p, why, sizeof(why)) != 0 ||
        launch(&p, why, sizeof(why)) != 0) {
        *mine = (rank_end){.known = true, .end = PROG_RANK_LAUNCH_FAILED, .code = -1, .tail = xstrdup("")};
        snprintf(mine->reason, sizeof(mine->reason), "%.*s", (int)sizeof(mine->reason) - 1, why);
    } else {
        const prog_rank_status *st = supervise(&p);
        *mine = (rank_end){.known = true,
                           .end = (int)st->end,
                           .code = st->code,
                           .tail = prog_logcap_tail(p.r.logs, p.r.rank, TAIL_LINES, TAIL_BYTES)};
        snprintf(mine->reason, sizeof(mine->reason), "%s", st->reason);
    }
    log_info("job %s: rank %d ended: %s", t->job_id, p.r.rank, mine->reason);
    /* not written (logged): the logs miss the end line; the job's result still says it */
    program_io_log_end(ctx->redis, t->job_id, p.r.rank, p.r.generation, mine->reason);
    if (p.gang) {
        char fieldname[32], *val = encode_end(mine->end, mine->code, mine->reason, mine->tail);
        snprintf(fieldname, sizeof(fieldname), "end:%d", p.r.rank);
        if (ctx->gang_put(ctx, fieldname, val) != 0)
            log_warn("job %s: rank %d's end not published (Redis unreachable): rank 0 counts it lost", t->job_id, p.r.rank);
        free(val);
    }
    /* stopped by the worker (cancel, preemption, resize, a limit): the worker says what follows */
    if (p.r.by_worker) {
        snprintf(err, errlen, "stopped: %s", mine->reason);
        prun_free(&p);
        return EXEC_RETRY;
    }
    if (p.r.rank != 0) { /* rank 0 decides for the generation */
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
            snprintf(cause, sizeof(cause), "the generation was stopped (%s)", p.r.stop_why[0] ? p.r.stop_why : p.ends[dr].reason);
        else
            snprintf(cause, sizeof(cause), "rank %d %s", dr, p.ends[dr].reason);
        if (restarts < p.r.set.max_restarts) {
            snprintf(err, errlen, "%s; restarting from the checkpoint (restart %d of %d)", cause, restarts + 1,
                     p.r.set.max_restarts);
            rc = EXEC_RETRY;
        } else {
            char note[64];
            snprintf(note, sizeof(note), " (no restarts left: %d of %d used)", restarts, p.r.set.max_restarts);
            failure_reason(&p, dr, note, err, errlen);
        }
    } else {
        failure_reason(&p, dr, "", err, errlen);
    }
    if (rc != EXEC_OK) { /* the failure's details: every rank's end and the deciding rank's last lines */
        *result = json_pack("{s:O, s:o, s:i, s:s}", "metrics", p.r.merged, "exit_codes", exit_codes(&p), "rank", dr, "log_tail",
                            p.ends[dr].tail ? p.ends[dr].tail : "");
        if (rc == EXEC_RETRY) json_decref(*result), *result = NULL;
    }
    prun_free(&p);
    return rc;
}
