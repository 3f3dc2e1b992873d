/* exec_infer.c - an inference replica: loads the model the server resolved
 * (spec.resolved.artifact), then serves batches from the job's request queue
 * (workers/serve_io.c) until the job is cancelled or replaced by a newer
 * generation.  It reports "replica ready" once and its counters every second
 * (gantry:infer:stats:<job>, for the autoscaler); latency is measured where the
 * client waits, in the server. */
#include "common/clock.h"
#include "common/alloc.h"
#include "common/keys.h"
#include "common/lua_scripts.h"
#include "workers/executor.h"
#include "workers/serve_io.h"

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

int exec_inference(exec_ctx *ctx, json_t **result, char *err, size_t errlen)
{
    (void)result;
    serve_settings s;
    serve_settings_get(ctx->task->spec, &s);
    const char *artifact = json_string_value(json_object_get(json_object_get(ctx->task->spec, "resolved"), "artifact"));
    if (!artifact || !ctx->redis) {
        snprintf(err, errlen, "the job has no resolved model artifact (submit it through the API)");
        return EXEC_FAILED;
    }
    char why[400];
    serve_model *m = serve_model_load(artifact, SERVE_MAX_SAMPLES, why, sizeof(why));
    if (!m) {
        snprintf(err, errlen, "cannot load model %s version %d: %s", s.model, s.version, why);
        return EXEC_FAILED;
    }
    serve_msg *batch = xcalloc((size_t)s.max_batch, sizeof(serve_msg));
    serve_request *reqs = xcalloc((size_t)s.max_batch, sizeof(serve_request));
    char msg[200];
    snprintf(msg, sizeof(msg), "replica ready: model %s version %d", s.model, s.version);
    ctx->progress(ctx, 0.0, msg, NULL);
    long long served = 0, batches = 0;
    double busy_s = 0;
    int64_t next_control = 0, next_stats = 0;
    int rc = EXEC_SILENT;
    for (;;) {
        int64_t now = clock_mono_us() / 1000;
        if (now >= next_control) {
            if (ctx->cancelled(ctx)) {
                snprintf(err, errlen, "stopped");
                rc = EXEC_FAILED; /* the worker sees the cancel and reports nothing */
                break;
            }
            if (superseded(ctx)) break;
            next_control = now + CONTROL_EVERY_MS;
        }
        if (now >= next_stats) {
            char stats[256];
            snprintf(stats, sizeof(stats), "{\"ts\":%lld,\"served\":%lld,\"batches\":%lld,\"busy_s\":%.6f,\"attempt\":%d}",
                     (long long)clock_now_ms(), served, batches, busy_s, ctx->task->attempt);
            serve_io_stats(ctx->redis, ctx->task->job_id, ctx->worker_id, stats);
            next_stats = now + STATS_EVERY_MS;
        }
        int n = serve_io_pop(ctx->redis, ctx->task->job_id, s.max_batch, POLL_MS, s.batch_delay_ms, batch);
        if (n < 0) usleep(POLL_MS * 1000); /* Redis unreachable: wait as a pop would, do not spin */
        if (n <= 0) continue;
        int64_t t0 = clock_mono_us();
        for (int i = 0; i < n; i++)
            reqs[i] = batch[i].req;
        serve_batch(m, s.model, s.version, reqs, n);
        for (int i = 0; i < n; i++)
            batch[i].req = reqs[i];
        busy_s += (double)(clock_mono_us() - t0) / 1e6;
        served += n, batches++;
        serve_io_reply(ctx->redis, batch, n);
    }
    free(batch);
    free(reqs);
    serve_model_free(m);
    return rc;
}
