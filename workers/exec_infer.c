/* exec_infer.c - an inference replica: starts the model the server resolved (spec.resolved, or
 * the newer version in gantry:infer:model:<job> when the job's alias moved) in its own sandboxed
 * process (workers/replica_proc.h), then moves batches of requests to that process and its replies
 * back: from the servers' direct connections (workers/serve_direct.h, the endpoint published in
 * gantry:infer:ep:<job>) and, every POLL_MS, from the job's Redis queue (workers/serve_io.c: what
 * a server sent before it knew the endpoint), until the job is cancelled or
 * replaced by a newer generation.  It reports "replica ready" once and its counters every second
 * (gantry:infer:stats:<job>, for the autoscaler); latency is measured where the client waits, in
 * the server.  The model's code never runs here: this loop only waits, with a deadline, on
 * pipes, so the worker stays responsive (and heart-beats from its own thread) whatever the
 * model does.
 *
 * Deadlines, from outside:
 *   - loading (and the warm-up pass): LOAD_DEADLINE_S; a model that crashes, fails or hangs
 *     while loading fails the job with the reason ("the model crashed while loading: signal 11
 *     (Segmentation fault)", "the model did not load in 60 s"): it would do the same on the next
 *     worker, so it is not placed again;
 *   - a batch: the job's timeout_ms (the server answers its clients 504 at the same deadline);
 *     past it the process is killed (SIGKILL), the batch's requests are answered 504 and the
 *     replica starts again;
 *   - a replica that dies while serving (a crash, its memory limit) is started again after
 *     0 s, 1 s, 2 s ... up to RESTART_MAX_S while it keeps dying (a minute without a death resets
 *     the wait), each time with an event on the job saying why;
 *   - a cancel is seen within CONTROL_EVERY_MS, also while a batch runs: the process is killed.
 *
 * A moved alias (server/models.h models_alias_set) rolls the replica without dropping a request:
 * a second process loads the new version beside the one being served, the loop keeps answering
 * with the old one meanwhile and swaps between two batches once the new one is ready.  A version
 * that fails to load is reported and the old one kept. */
#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"
#include "workers/executor.h"
#include "workers/replica_proc.h"
#include "workers/serve_direct.h"
#include "workers/serve_io.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define POLL_MS 100          /* longest wait for a request before checking for a stop */
#define CONTROL_EVERY_MS 500 /* cancel / superseded checks */
#define STATS_EVERY_MS 1000
#define LOAD_DEADLINE_S 60
#define RESTART_MAX_S 30
#define HEALTHY_S 60 /* a replica up this long resets the restart backoff */

/* one model version in its process */
typedef struct {
    replica_proc *proc;
    int version;
    int64_t started_us;
} running;

static int start(exec_ctx *ctx, const serve_settings *s, replica_shm *shm, const json_t *resolved, running *out, char *err,
                 size_t errlen)
{
    char *text = json_dumps(resolved, JSON_COMPACT);
    rp_spec sp = {
        .name = s->model,
        .resolved = text ? text : "{}",
        .threads = ctx->threads,
        .memory_bytes = ctx->task->max_memory_bytes,
        .uid = ctx->sandbox_uid,
        .gid = ctx->sandbox_uid, /* the slot's own group: a replica shares no file */
        .bin_dir = ctx->bin_dir,
        .shm = shm,
#ifdef __SANITIZE_ADDRESS__
        .proc = true, /* CI's sanitizer build: ASan needs /proc/self/maps (replica_proc.h) */
#endif
    };
    out->proc = rp_start(&sp, err, errlen);
    free(text);
    out->version = (int)json_integer_value(json_object_get(resolved, "version"));
    out->started_us = clock_mono_us();
    return out->proc ? 0 : -1;
}

/* a cancel, checked at most every CONTROL_EVERY_MS while a batch or a load runs */
typedef struct {
    exec_ctx *ctx;
    int64_t next_us;
    bool cancelled;
} stop_check;

static bool stop_now(void *arg)
{
    stop_check *c = arg;
    int64_t now = clock_mono_us();
    if (!c->cancelled && now >= c->next_us) {
        c->cancelled = c->ctx->cancelled(c->ctx);
        c->next_us = now + CONTROL_EVERY_MS * 1000;
    }
    return c->cancelled;
}

/* waits for the process to load: 1 ready, -1 failed (why), 0 cancelled meanwhile */
static int await_ready(running *r, stop_check *sc, char *why, size_t whylen)
{
    int64_t deadline = r->started_us + (int64_t)LOAD_DEADLINE_S * 1000000;
    for (;;) {
        int rc = rp_ready(r->proc, POLL_MS, why, whylen);
        if (rc != 0) return rc;
        if (stop_now(sc)) return 0;
        if (clock_mono_us() >= deadline) {
            snprintf(why, whylen, "the model did not load in %d s", LOAD_DEADLINE_S);
            return -1;
        }
    }
}

/* answers every request of a batch the replica did not: status and message */
static void answer_all(serve_msg *batch, int n, int status, const char *message)
{
    for (int i = 0; i < n; i++) {
        json_t *e = json_pack("{s:{s:s, s:s, s:n}}", "error", "code", status == 504 ? "timeout" : "unavailable", "message", message,
                              "field");
        batch[i].req.reply = e ? json_dumps(e, JSON_COMPACT) : NULL;
        batch[i].req.status = status;
        json_decref(e);
    }
}

int exec_inference(exec_ctx *ctx, json_t **result, char *err, size_t errlen)
{
    (void)result;
    serve_settings s;
    serve_settings_get(ctx->task->spec, &s);
    if (!ctx->redis) {
        snprintf(err, errlen, "an inference replica needs Redis");
        return EXEC_FAILED;
    }
    stop_check sc = {.ctx = ctx};
    json_t *moved =
        serve_io_wanted_model(ctx->redis, ctx->task->job_id); /* a replica started after an alias moved serves the new version */
    json_t *resolved = json_deep_copy(moved ? moved : json_object_get(ctx->task->spec, "resolved"));
    json_decref(moved);
    char why[700], msg[900];
    running cur = {0}, next = {0};
    json_t *loading = NULL; /* the version next loads */
    int version = (int)json_integer_value(json_object_get(resolved, "version"));
    /* the request region every replica process of this job maps (replica_shm.h): bodies read from the
     * servers' connections straight into it, replies back through it */
    replica_shm *shm = rs_create(RS_SIZE, why, sizeof(why));
    if (!shm) log_warn("job %s: requests go to the replica through its pipe: %s", ctx->task->job_id, why);
    int rc = start(ctx, &s, shm, resolved, &cur, why, sizeof(why)) == 0 ? await_ready(&cur, &sc, why, sizeof(why)) : -1;
    if (rc <= 0) {
        rp_free(cur.proc);
        rs_free(shm);
        json_decref(resolved);
        if (rc == 0) {
            snprintf(err, errlen, "stopped");
            return EXEC_FAILED; /* the worker sees the cancel and reports nothing */
        }
        snprintf(err, errlen, "cannot load model %s version %d: %s", s.model, version, why);
        return EXEC_FAILED;
    }
    serve_msg *batch = xcalloc((size_t)s.max_batch, sizeof(serve_msg));
    /* the direct path (serve_direct.h): the servers connect here once the endpoint is published; the
     * Redis queue stays for what a server sent before it knew the endpoint */
    const char *host = ctx->advertise_host;
    serve_direct *direct = sd_open(host, why, sizeof(why));
    if (direct) sd_use_region(direct, shm);
    if (direct)
        serve_io_endpoint(ctx->redis, ctx->task->job_id, ctx->worker_id, sd_endpoint(direct), ctx->task->attempt);
    else
        log_warn("job %s: no direct endpoint, requests come through Redis only: %s", ctx->task->job_id, why);
    snprintf(msg, sizeof(msg), "replica ready: model %s version %d", s.model, cur.version);
    ctx->note(ctx, msg);
    long long served = 0, batches = 0;
    double busy_s = 0;
    int64_t next_control = 0, next_stats = 0, next_queue = 0, restart_at = 0, restart_wait_s = 0;
    int failed_version = 0, deaths = 0;
    rc = EXEC_SILENT;
    for (;;) {
        int64_t now = clock_mono_us() / 1000;
        if (now >= next_control) {
            if (stop_now(&sc)) {
                snprintf(err, errlen, "stopped");
                rc = EXEC_FAILED; /* the worker sees the cancel and reports nothing */
                break;
            }
            if (serve_io_superseded(ctx->redis, ctx->task->job_id, ctx->task->attempt, ctx->worker_id)) break;
            json_t *want = next.proc ? NULL : serve_io_wanted_model(ctx->redis, ctx->task->job_id);
            int v = (int)json_integer_value(json_object_get(want, "version"));
            if (want && v > 0 && v != cur.version && v != failed_version) {
                if (start(ctx, &s, shm, want, &next, why, sizeof(why)) == 0) {
                    loading = json_incref(want);
                } else {
                    failed_version = v;
                    snprintf(msg, sizeof(msg), "replica keeps model %s version %d: version %d cannot start: %s", s.model,
                             cur.version, v, why);
                    ctx->note(ctx, msg);
                }
            }
            json_decref(want);
            next_control = now + CONTROL_EVERY_MS;
        }
        if (next.proc) { /* between two batches: a loaded new version takes over */
            int ready = rp_ready(next.proc, 0, why, sizeof(why));
            if (ready == 0 && clock_mono_us() - next.started_us > (int64_t)LOAD_DEADLINE_S * 1000000) {
                snprintf(why, sizeof(why), "the model did not load in %d s", LOAD_DEADLINE_S);
                ready = -1;
            }
            if (ready == 1) {
                snprintf(msg, sizeof(msg), "replica switched: model %s version %d -> %d", s.model, cur.version, next.version);
                rp_free(cur.proc);
                cur = next;
                json_decref(resolved);
                resolved = loading; /* what a restart loads from now on */
                loading = NULL;
            } else if (ready < 0) {
                failed_version = next.version;
                snprintf(msg, sizeof(msg), "replica keeps model %s version %d: version %d does not load: %s", s.model, cur.version,
                         next.version, why);
                rp_free(next.proc);
                json_decref(loading);
                loading = NULL;
            }
            if (ready != 0) {
                next = (running){0};
                ctx->note(ctx, msg);
            }
        }
        if (cur.proc && !rp_alive(cur.proc, why, sizeof(why))) { /* died between batches */
            rp_free(cur.proc);
            cur.proc = NULL;
            restart_at = -1;
        }
        if (!cur.proc) { /* (re)start after the backoff; the queue waits meanwhile, or goes to other replicas */
            if (restart_at < 0) {
                restart_wait_s = deaths == 0 ? 0 : restart_wait_s == 0 ? 1 : restart_wait_s * 2;
                if (restart_wait_s > RESTART_MAX_S) restart_wait_s = RESTART_MAX_S;
                deaths++;
                restart_at = now + restart_wait_s * 1000;
                snprintf(msg, sizeof(msg), "replica restarting in %lld s: %s (%d time%s)", (long long)restart_wait_s, why, deaths,
                         deaths == 1 ? "" : "s in a row");
                ctx->note(ctx, msg);
                log_warn("job %s: %s", ctx->task->job_id, msg);
            }
            if (now < restart_at) {
                usleep(POLL_MS * 1000);
                continue;
            }
            int up = start(ctx, &s, shm, resolved, &cur, why, sizeof(why)) == 0 ? await_ready(&cur, &sc, why, sizeof(why)) : -1;
            if (up == 1) {
                restart_at = 0;
                snprintf(msg, sizeof(msg), "replica ready again: model %s version %d", s.model, cur.version);
                ctx->note(ctx, msg);
            } else {
                rp_free(cur.proc);
                cur.proc = NULL;
                restart_at = -1; /* cancelled: seen at the next control check */
            }
            continue;
        }
        if (deaths && clock_mono_us() - cur.started_us > (int64_t)HEALTHY_S * 1000000) deaths = 0, restart_wait_s = 0;
        if (now >= next_stats) {
            char stats[256];
            snprintf(stats, sizeof(stats),
                     "{\"ts\":%lld,\"served\":%lld,\"batches\":%lld,\"busy_s\":%.6f,\"attempt\":%d,\"version\":%d}",
                     (long long)clock_now_ms(), served, batches, busy_s, ctx->task->attempt, cur.version);
            serve_io_stats(ctx->redis, ctx->task->job_id, ctx->worker_id, stats);
            if (direct) /* again: Redis may have lost it (a restart without its data) */
                serve_io_endpoint(ctx->redis, ctx->task->job_id, ctx->worker_id, sd_endpoint(direct), ctx->task->attempt);
            next_stats = now + STATS_EVERY_MS;
        }
        int n = direct ? sd_pop(direct, s.max_batch, POLL_MS, s.batch_delay_ms, batch) : 0;
        if (!direct || (n < s.max_batch && clock_mono_us() / 1000 >= next_queue)) { /* the Redis queue, every POLL_MS */
            int k = serve_io_pop(ctx->redis, ctx->task->job_id, s.max_batch - n, direct ? 0 : POLL_MS, s.batch_delay_ms, batch + n);
            if (k < 0 && !direct) usleep(POLL_MS * 1000); /* Redis unreachable: wait as a pop would, do not spin */
            if (k > 0) n += k;
            next_queue = clock_mono_us() / 1000 + POLL_MS;
        }
        if (n <= 0) continue;
        int64_t t0 = clock_mono_us();
        serve_request *reqs = xcalloc((size_t)n, sizeof(*reqs));
        for (int i = 0; i < n; i++)
            reqs[i] = batch[i].req;
        rp_result res = rp_batch(cur.proc, reqs, n, t0 + (int64_t)s.timeout_ms * 1000, POLL_MS, stop_now, &sc, why, sizeof(why));
        for (int i = 0; i < n; i++)
            batch[i].req = reqs[i];
        free(reqs);
        busy_s += (double)(clock_mono_us() - t0) / 1e6;
        served += n, batches++;
        if (res != RP_OK) {
            if (res == RP_TIMEOUT)
                snprintf(msg, sizeof(msg),
                         "the model did not answer within %d ms (timeout_ms): its replica was killed and restarts", s.timeout_ms);
            else
                snprintf(msg, sizeof(msg), "the replica could not answer: %s", why);
            answer_all(batch, n, res == RP_TIMEOUT ? 504 : 503, msg);
            if (res == RP_TIMEOUT) snprintf(why, sizeof(why), "the model did not answer within %d ms", s.timeout_ms);
            rp_free(cur.proc);
            cur.proc = NULL;
            restart_at = res == RP_STOPPED ? 0 : -1;
            if (res == RP_STOPPED) next_control = 0;
        }
        serve_io_reply(ctx->redis, batch, n);
        if (direct) sd_reply(direct, batch, n);
    }
    if (direct) serve_io_endpoint(ctx->redis, ctx->task->job_id, ctx->worker_id, NULL, 0);
    sd_close(direct);
    rp_free(next.proc);
    rp_free(cur.proc);
    rs_free(shm); /* after the replicas (which map it) and the connections (whose bodies are in it) */
    json_decref(loading);
    json_decref(resolved);
    free(batch);
    return rc;
}
