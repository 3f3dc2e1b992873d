/* infer.h - the inference gateway: the server's side of serving.
 *
 * An Open Inference Protocol request for a running inference job goes straight to one of the job's
 * replicas over a persistent connection to its worker (server/infer_link.h: the endpoints the workers
 * publish in gantry:infer:ep:<job>, the least loaded first; past queue_limit waiting, 429); a
 * connection lost with requests on it costs each one retry on another replica, or 503.  Before the
 * job's endpoints are known the request is queued in Redis instead (gantry:infer:q:<job>, refused
 * atomically past the job's queue_limit) with the name of this server's reply stream, where the
 * replica's answer comes back (one blocking XREAD for many replies).  Nothing waits forever: a
 * request without an answer after the job's timeout_ms gets 504.  A job that scales to zero (replicas.min 0)
 * with no ready replica: its request waits up to cold_start_ms (if longer) while the autoscaler starts one,
 * and gets 503 with Retry-After when none is ready by then.
 *
 * Latency is measured here, where the client waits (queueing, batching and the
 * forward pass included).  Every INFER_FLUSH_MS each job with traffic gets a
 * metrics point (rate, p50/p95/p99, SLO attainment, drops, timeouts) in
 * job_metrics, on the SSE stream, and in gantry:infer:stats:<job> for the
 * autoscaler; /metrics has the running totals. */
#ifndef GANTRY_INFER_H
#define GANTRY_INFER_H

#include <stdio.h>

#include "wire/redis_auth.h"
#include "server/http.h"

#define INFER_FLUSH_MS 2000

typedef struct infer_gw infer_gw;

typedef struct {
    char job_id[48], tenant[48];
    int queue_limit, timeout_ms;
    int cold_start_ms;    /* replicas.min 0: how long a request waits when the job has no ready replica; else 0 */
    double slo_ms, slo_q; /* q in (0,1) */
} infer_target;

/* max_jobs: inference jobs whose request counters are kept (/metrics, the serving points); beyond it the
 * oldest entry without a request in flight is forgotten (<= 0: 1024) */
infer_gw *infer_create(server *srv, const char *host, int port, const redis_auth *auth, int max_jobs);
/* Answers c later: the replica's reply, or 429 / 503 / 504 as above. */
void infer_forward(infer_gw *g, http_ctx *c, const infer_target *t, const char *body, size_t len);
/* A short-lived cache of which running job serves (tenant, model): NULL when
 * unknown or older than half a second (a cancelled job stops receiving requests
 * within that time). */
const infer_target *infer_cached(infer_gw *g, const char *tenant, const char *model);
void infer_cache_put(infer_gw *g, const char *tenant, const char *model, const infer_target *t);
/* the gateway's counters and latency figures, Prometheus text, onto out (the /metrics exposition) */
void infer_render_metrics(infer_gw *g, FILE *out);
void infer_close(infer_gw *g);

#endif
