/* exec_infer.c - an inference replica: loads the model the server resolved
 * (spec.resolved, or the newer version in gantry:infer:model:<job> when the job's alias moved),
 * then serves batches from the job's request queue (workers/serve_io.c) until the job is
 * cancelled or replaced by a newer generation.  It reports "replica ready" once and its counters
 * every second (gantry:infer:stats:<job>, for the autoscaler); latency is measured where the
 * client waits, in the server.
 *
 * A moved alias (server/models.h models_alias_set) rolls the replica without dropping a request:
 * a thread loads the new version beside the one being served (and runs its warm-up pass), the
 * loop keeps answering with the old one meanwhile, and swaps between two batches once the new
 * one is ready.  A version that fails to load is reported and the old one kept. */
#include "common/clock.h"
#include "common/alloc.h"
#include "common/keys.h"
#include "common/lua_scripts.h"
#include "workers/executor.h"
#include "workers/serve/replica_model.h"
#include "workers/serve_io.h"

#include <pthread.h>
#include <stdatomic.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define POLL_MS 100          /* longest wait for a request before checking for a stop */
#define CONTROL_EVERY_MS 500 /* cancel / superseded checks */
#define STATS_EVERY_MS 1000

/* the job was requeued as a newer generation (a replica was lost), or the autoscaler
 * drains this replica: it steps aside */
static bool superseded(exec_ctx *ctx)
{
    char drain[192];
    snprintf(drain, sizeof(drain), "%s%s:%s", K_INFER_DRAIN_PREFIX, ctx->task->job_id, ctx->worker_id);
    redisReply *rep = rs_command(ctx->redis, "EVAL %s 2 %s%s:%d %s", lua_infer_superseded, K_RETRY_PREFIX, ctx->task->job_id,
                                 ctx->task->attempt, drain);
    bool yes = rep && rep->type == REDIS_REPLY_INTEGER && rep->integer >= 1;
    freeReplyObject(rep);
    return yes;
}

/* the version the job's replicas should serve now: the moved alias's (a new reference), or NULL */
static json_t *wanted_model(exec_ctx *ctx)
{
    redisReply *rep = rs_command(ctx->redis, "GET %s%s", K_INFER_MODEL_PREFIX, ctx->task->job_id);
    json_t *j = rep && rep->type == REDIS_REPLY_STRING ? json_loadb(rep->str, rep->len, 0, NULL) : NULL;
    freeReplyObject(rep);
    return j;
}

/* a version being loaded beside the served one */
typedef struct {
    pthread_t thread;
    bool running;
    atomic_bool done;
    json_t *resolved;
    int threads;
    replica_model *loaded;
    char err[400];
} switcher;

static void *load_thread(void *arg)
{
    switcher *w = arg;
    w->loaded = replica_model_load(w->resolved, w->threads, w->err, sizeof(w->err));
    atomic_store(&w->done, true);
    return NULL;
}

static void switch_start(switcher *w, json_t *resolved, int threads)
{
    w->resolved = resolved, w->threads = threads, w->loaded = NULL, w->err[0] = '\0';
    atomic_store(&w->done, false);
    w->running = pthread_create(&w->thread, NULL, load_thread, w) == 0;
    if (!w->running) {
        snprintf(w->err, sizeof(w->err), "cannot start a loading thread");
        atomic_store(&w->done, true);
    }
}

/* joins a finished load: the new model or NULL (w->err says why) */
static replica_model *switch_finish(switcher *w)
{
    if (w->running) pthread_join(w->thread, NULL);
    w->running = false;
    json_decref(w->resolved);
    w->resolved = NULL;
    return w->loaded;
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
    json_t *moved = wanted_model(ctx); /* a replica started after an alias moved serves the new version */
    const json_t *resolved = moved ? moved : json_object_get(ctx->task->spec, "resolved");
    char why[400];
    replica_model *m = replica_model_load(resolved, ctx->threads, why, sizeof(why));
    json_decref(moved);
    if (!m) {
        snprintf(err, errlen, "cannot load model %s version %d: %s", s.model, s.version, why);
        return EXEC_FAILED;
    }
    serve_msg *batch = xcalloc((size_t)s.max_batch, sizeof(serve_msg));
    serve_request *reqs = xcalloc((size_t)s.max_batch, sizeof(serve_request));
    char msg[600];
    snprintf(msg, sizeof(msg), "replica ready: model %s version %d", s.model, replica_model_version(m));
    ctx->progress(ctx, 0.0, msg, NULL);
    long long served = 0, batches = 0;
    double busy_s = 0;
    int64_t next_control = 0, next_stats = 0;
    int rc = EXEC_SILENT, failed_version = 0;
    switcher sw = {0};
    for (;;) {
        int64_t now = clock_mono_us() / 1000;
        if (now >= next_control) {
            if (ctx->cancelled(ctx)) {
                snprintf(err, errlen, "stopped");
                rc = EXEC_FAILED; /* the worker sees the cancel and reports nothing */
                break;
            }
            if (superseded(ctx)) break;
            json_t *want = sw.running ? NULL : wanted_model(ctx);
            int v = (int)json_integer_value(json_object_get(want, "version"));
            if (want && v > 0 && v != replica_model_version(m) && v != failed_version)
                switch_start(&sw, want, ctx->threads); /* takes want */
            else
                json_decref(want);
            next_control = now + CONTROL_EVERY_MS;
        }
        if (sw.running && atomic_load(&sw.done)) { /* between two batches: the new version takes over */
            int from = replica_model_version(m), to = (int)json_integer_value(json_object_get(sw.resolved, "version"));
            replica_model *next = switch_finish(&sw);
            if (next) {
                replica_model_free(m);
                m = next;
                snprintf(msg, sizeof(msg), "replica switched: model %s version %d -> %d", s.model, from, to);
            } else {
                failed_version = to;
                snprintf(msg, sizeof(msg), "replica keeps model %s version %d: version %d does not load: %s", s.model, from, to,
                         sw.err);
            }
            ctx->progress(ctx, 0.0, msg, NULL);
        }
        if (now >= next_stats) {
            char stats[256];
            snprintf(stats, sizeof(stats),
                     "{\"ts\":%lld,\"served\":%lld,\"batches\":%lld,\"busy_s\":%.6f,\"attempt\":%d,\"version\":%d}",
                     (long long)clock_now_ms(), served, batches, busy_s, ctx->task->attempt, replica_model_version(m));
            serve_io_stats(ctx->redis, ctx->task->job_id, ctx->worker_id, stats);
            next_stats = now + STATS_EVERY_MS;
        }
        int n = serve_io_pop(ctx->redis, ctx->task->job_id, s.max_batch, POLL_MS, s.batch_delay_ms, batch);
        if (n < 0) usleep(POLL_MS * 1000); /* Redis unreachable: wait as a pop would, do not spin */
        if (n <= 0) continue;
        int64_t t0 = clock_mono_us();
        for (int i = 0; i < n; i++)
            reqs[i] = batch[i].req;
        replica_model_batch(m, s.model, reqs, n);
        for (int i = 0; i < n; i++)
            batch[i].req = reqs[i];
        busy_s += (double)(clock_mono_us() - t0) / 1e6;
        served += n, batches++;
        serve_io_reply(ctx->redis, batch, n);
    }
    if (sw.running) replica_model_free(switch_finish(&sw)); /* a load in flight finishes first */
    free(batch);
    free(reqs);
    replica_model_free(m);
    return rc;
}
