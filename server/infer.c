/* infer.c - the inference gateway: requests to the replicas, replies to the clients, per-job counters (infer.h). */
#include "server/infer.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "common/ids.h"
#include "wire/infer_frame.h"
#include "wire/infer_wire.h"
#include "wire/keys.h"
#include "common/log.h"
#include "wire/lua_scripts.h"
#include "wire/redis_link.h"
#include "server/infer_link.h"
#include "server/jobs.h"
#include "server/server.h"
#include "server/sse.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PEND_CAP 65536 /* requests in flight per server (a power of two) */
#define NBUCKETS 80    /* latency histogram: bucket i holds latencies up to 0.05 ms x 1.2^i (the last: everything above) */
#define REPLY_BATCH 1000
#define CACHE_SIZE 256
#define CACHE_TTL_MS 500 /* how long a (tenant, model) -> running job lookup is reused */
#define EP_EVERY_MS 1000 /* how often a job's endpoints are read again while it has traffic */
#define EP_IDLE_MS 60000 /* a job without a request for this long is no longer followed */

typedef struct {
    unsigned long long n, ok, slo_ok, drops, timeouts, errors;
    unsigned long long hist[NBUCKETS];
    double sum_ms;
} counts;

typedef struct {
    char job_id[48], tenant[48];
    double slo_ms, slo_q;
    counts win, total; /* since the last flush, since the start */
    int64_t win_start_ms;
    int pending; /* requests in flight that point here (pend.js): while any, the entry is not freed */
    int queued;  /* of those, the ones sent through the Redis queue (counted against queue_limit on both paths) */
    int64_t last_req_ms, ep_next_ms;
    long long arrivals, drops; /* on the direct path, not yet added to gantry:infer:stats:<job> (for the autoscaler) */
    double admit_rate;         /* overloaded (gantry:infer:admit:<job>): requests a second this server admits; 0: all */
    double admit_tokens;       /* the token bucket that holds it to that rate */
    int64_t admit_us;          /* when the bucket was last filled */
} jstats;

typedef struct pend {
    infer_gw *g;
    uint64_t seq;
    http_defer *defer;
    jstats *js;
    int64_t t0_us;
    uv_timer_t timer;
    ilink_frame *frame;  /* on the direct path: the request, kept for one retry */
    uint32_t link;       /* the direct link it waits on, 0: none (the Redis queue) */
    int retried, queued; /* queued: sent through the Redis queue (jstats.queued) */
    int cold_start_ms;   /* waiting for a scaled-to-zero job's first replica: the wait allowed; else 0 */
    infer_target t;      /* its job's limits (a fallback to the queue needs them) */
} pend;

typedef struct {
    char tenant[48], model[208];
    int64_t until_ms;
    infer_target t;
} cache_entry;

struct infer_gw {
    server *srv;
    cache_entry cache[CACHE_SIZE];
    char sha[48]; /* of lua_infer_enqueue, once loaded */
    char sid[32], replies[96];
    redis_auth auth;
    redis_link *tx, *rx; /* requests queued and the stats; the blocking XREAD of the replies */
    int reading;
    char last_id[64];
    uint64_t seq;
    pend *slots[PEND_CAP];
    jstats **jobs; /* oldest first */
    int njobs, cap, max_jobs;
    infer_links *links; /* the direct path (infer_link.h) */
    uv_timer_t tick;
    int64_t last_flush_ms;
};

static double bucket_ms(int i)
{
    return 0.05 * pow(1.2, i);
}

static int bucket_of(double ms)
{
    int i = ms <= 0.05 ? 0 : (int)ceil(log(ms / 0.05) / log(1.2));
    return i < 0 ? 0 : i >= NBUCKETS ? NBUCKETS - 1 : i;
}

static double percentile(const counts *c, double q)
{
    unsigned long long n = 0;
    for (int i = 0; i < NBUCKETS; i++)
        n += c->hist[i];
    if (n == 0) return 0;
    unsigned long long want = (unsigned long long)ceil(q * (double)n), cum = 0;
    for (int i = 0; i < NBUCKETS; i++)
        if ((cum += c->hist[i]) >= want) return bucket_ms(i);
    return bucket_ms(NBUCKETS - 1);
}

static jstats *stats_for(infer_gw *g, const infer_target *t)
{
    for (int i = 0; i < g->njobs; i++)
        if (strcmp(g->jobs[i]->job_id, t->job_id) == 0) return g->jobs[i];
    if (g->njobs >= g->max_jobs) {
        /* forget the oldest entry that no request in flight points at (each pend holds a counted
         * reference, so an entry is never freed under one); when every entry has requests in flight,
         * the table grows past max_jobs: at most by the requests in flight (PEND_CAP), and it shrinks
         * back as new jobs come while those requests end */
        for (int i = 0; i < g->njobs; i++) {
            if (g->jobs[i]->pending) continue;
            free(g->jobs[i]);
            memmove(g->jobs + i, g->jobs + i + 1, sizeof(g->jobs[0]) * (size_t)(g->njobs - i - 1));
            g->njobs--;
            break;
        }
    }
    if (g->njobs == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 64;
        g->jobs = xrealloc(g->jobs, sizeof(g->jobs[0]) * (size_t)g->cap);
    }
    jstats *js = xcalloc(1, sizeof(*js));
    snprintf(js->job_id, sizeof(js->job_id), "%s", t->job_id);
    snprintf(js->tenant, sizeof(js->tenant), "%s", t->tenant);
    js->slo_ms = t->slo_ms, js->slo_q = t->slo_q;
    js->win_start_ms = clock_now_ms();
    g->jobs[g->njobs++] = js;
    return js;
}

/* outcome of one request: status 200 with its latency, 400 (the client's fault), 429 dropped, 504 timed out, 503 */
static void record(jstats *js, int status, double ms)
{
    counts *cs[2] = {&js->win, &js->total};
    for (int k = 0; k < 2; k++) {
        counts *c = cs[k];
        c->n++;
        if (status == 200) {
            c->ok++;
            c->hist[bucket_of(ms)]++;
            c->sum_ms += ms;
            if (ms <= js->slo_ms) c->slo_ok++;
        } else if (status == 429) {
            c->drops++;
        } else if (status == 504) {
            c->timeouts++;
        } else {
            c->errors++;
        }
    }
}

static void free_pend(uv_handle_t *h)
{
    free(h->data);
}

/* answers the request (if its client is still there) and forgets it */
static void finish(pend *p, int status, const char *body, size_t len)
{
    infer_gw *g = p->g;
    g->slots[p->seq & (PEND_CAP - 1)] = NULL;
    if (p->link) ilinks_done(g->links, p->link);
    ilink_frame_unref(p->frame);
    p->frame = NULL;
    record(p->js, status, (double)(clock_mono_us() - p->t0_us) / 1000.0);
    p->js->queued -= p->queued;
    p->js->pending--; /* the entry may be forgotten from now on: p->js is not used again */
    p->js = NULL;
    http_ctx *c = http_defer_ctx(p->defer);
    if (c) {
        if (status == 429) http_add_header(c, "retry-after", "1");
        if (status == 503 && p->cold_start_ms) http_add_header(c, "retry-after", "10"); /* a replica is still starting */
        http_reply_text(c, status, "application/json", body, len);
    }
    http_defer_end(p->defer);
    uv_timer_stop(&p->timer);
    uv_close((uv_handle_t *)&p->timer, free_pend);
}

static void finish_error_code(pend *p, gerr e, const char *code, const char *msg)
{
    json_t *o = json_pack("{s:{s:s, s:s}}", "error", "code", code, "message", msg);
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    finish(p, gerr_status(e), s ? s : "{}", s ? strlen(s) : 2);
    free(s);
}

static void finish_error(pend *p, gerr e, const char *msg)
{
    finish_error_code(p, e, e == GERR_RATE_LIMITED ? "queue_full" : gerr_code(e), msg);
}

/* while the job is overloaded (admit_rate set by the autoscaler): whether this request fits the rate its
 * replicas serve within the SLO (a token bucket holding a fifth of a second's worth) */
static bool admitted(jstats *js)
{
    if (js->admit_rate <= 0) return true;
    int64_t now = clock_mono_us();
    double cap = js->admit_rate * 0.2 > 1 ? js->admit_rate * 0.2 : 1;
    js->admit_tokens += js->admit_rate * (double)(now - js->admit_us) / 1e6;
    if (js->admit_tokens > cap) js->admit_tokens = cap;
    js->admit_us = now;
    if (js->admit_tokens < 1) return false;
    js->admit_tokens -= 1;
    return true;
}

static pend *lookup(infer_gw *g, uint64_t seq)
{
    pend *p = g->slots[seq & (PEND_CAP - 1)];
    return p && p->seq == seq ? p : NULL;
}

static void on_timeout(uv_timer_t *t)
{
    pend *p = t->data;
    char msg[300];
    int ready = 0;
    if (p->cold_start_ms) ilinks_outstanding(p->g->links, p->js->job_id, &ready);
    if (p->cold_start_ms && ready == 0) {
        snprintf(msg, sizeof(msg),
                 "the model is scaled to zero (replicas.min 0) and no replica was ready within %d ms (the job's cold_start_ms); "
                 "one is starting: retry later",
                 p->cold_start_ms);
        finish_error(p, GERR_UNAVAILABLE, msg);
        return;
    }
    snprintf(msg, sizeof(msg), "no reply from the model's replicas within %" PRId64 " ms (the job's timeout_ms)",
             (clock_mono_us() - p->t0_us) / 1000);
    finish_error(p, GERR_TIMEOUT, msg);
}

static void on_enqueued(redis_link *l, const redisReply *rep, const char *err, void *priv)
{
    infer_gw *g = redis_link_data(l);
    pend *p = lookup(g, (uint64_t)(uintptr_t)priv);
    bool noscript = err && strncmp(err, "NOSCRIPT", 8) == 0;
    if (noscript) g->sha[0] = '\0'; /* the script cache was emptied (SCRIPT FLUSH, a failover): the next request sends EVAL */
    if (!p) return;                 /* already answered (timed out) */
    if (noscript)
        finish_error(p, GERR_UNAVAILABLE, "the request could not be queued (Redis lost the gateway's script); retry");
    else if (err) /* the script failed: logged with the command by the link */
        finish_error(p, GERR_INTERNAL, "the server could not queue the request (the enqueue script failed; see the server log)");
    else if (!rep)
        finish_error(p, GERR_UNAVAILABLE, "the request could not be queued (Redis unreachable); retry");
    else if (rep->type != REDIS_REPLY_INTEGER) {
        log_error("inference: the enqueue script answered a reply of type %d, not an integer", rep->type);
        finish_error(p, GERR_INTERNAL, "the server could not queue the request (an unexpected reply from its enqueue script)");
    } else if (rep->integer == 0)
        finish_error(p, GERR_RATE_LIMITED, "the model's request queue is full (the job's queue_limit); retry later");
}

/* the Redis queue's path: the request in the job's queue (at most queue_limit there), for whichever replica
 * takes it; answered by on_enqueued when it could not be queued */
static void send_queued(infer_gw *g, pend *p, size_t json_len, const char *body, size_t len)
{
    if (!redis_link_up(g->tx)) {
        finish_error(p, GERR_UNAVAILABLE, "the inference gateway is not connected to Redis; retry");
        return;
    }
    char head[IW_HEAD_MAX], queue[128], stats[128], limit[24];
    int hl = iw_request_head(head, sizeof(head), p->seq, g->replies, json_len); /* wire/infer_wire.h */
    if (hl < 0) hl = 0; /* (the server's own stream name always fits: its consumer name is short) */
    char *req = xmalloc((size_t)hl + len);
    memcpy(req, head, (size_t)hl);
    memcpy(req + hl, body, len);
    snprintf(queue, sizeof(queue), "%s%s", K_INFER_QUEUE_PREFIX, p->js->job_id);
    snprintf(stats, sizeof(stats), "%s%s", K_INFER_STATS_PREFIX, p->js->job_id);
    snprintf(limit, sizeof(limit), "%d", p->t.queue_limit); /* (no ready link: none has requests waiting) */
    p->queued = 1, p->js->queued++;
    const char *argv[] = {g->sha[0] ? "EVALSHA" : "EVAL", g->sha[0] ? g->sha : lua_infer_enqueue, "2", queue, stats, limit, req};
    size_t lens[] = {strlen(argv[0]), strlen(argv[1]), 1, strlen(queue), strlen(stats), strlen(limit), (size_t)hl + len};
    if (redis_link_cmd_argv(g->tx, on_enqueued, (void *)(uintptr_t)p->seq,
                            g->sha[0] ? "EVALSHA infer_enqueue" : "EVAL infer_enqueue", 7, argv, lens) != 0)
        finish_error(p, GERR_UNAVAILABLE, "the request could not be queued (Redis unreachable); retry");
    free(req);
}

/* waits for a replica of a job that scales to zero (cold_start_ms): no ready one now, one may be starting */
static void wait_cold(pend *p, const infer_target *t)
{
    p->cold_start_ms = t->cold_start_ms > t->timeout_ms ? t->cold_start_ms : t->timeout_ms;
    if (t->cold_start_ms > t->timeout_ms) uv_timer_start(&p->timer, on_timeout, (uint64_t)t->cold_start_ms, 0);
}

/* the direct path (infer_link.h): 1 sent, or answered 429; 0 when the job has no ready link (the
 * request goes through the Redis queue) */
static int forward_direct(infer_gw *g, pend *p, const infer_target *t, size_t json_len, const char *body, size_t len)
{
    int ready, out = ilinks_outstanding(g->links, t->job_id, &ready);
    if (ready == 0) return 0;
    /* queue_limit waiting beside one request in each replica's hands; while a job's first link opens,
     * requests sent through the Redis queue just before count too (one limit, whichever path) */
    if (out + p->js->queued >= t->queue_limit + ready) {
        p->js->drops++;
        finish_error(p, GERR_RATE_LIMITED, "the model's request queue is full (the job's queue_limit); retry later");
        return 1;
    }
    ilink_frame *f = ilink_frame_new(&(if_head){.kind = IF_REQUEST, .arg = (uint32_t)json_len, .id = p->seq, .len = len}, body);
    p->link = ilinks_send(g->links, t->job_id, f, 0);
    if (!p->link) {
        ilink_frame_unref(f);
        return 0;
    }
    p->frame = f;
    p->js->arrivals++;
    return 1;
}

static void on_direct_reply(void *arg, uint64_t seq, int status, const char *body, size_t len)
{
    pend *p = lookup(arg, seq);
    if (p) finish(p, status, body, len); /* else already answered (timed out) */
}

/* a link dropped: what waited on it is sent once more on another of its job's links, or answered 503 */
static void on_link_lost(void *arg, uint32_t link)
{
    infer_gw *g = arg;
    for (int i = 0; i < PEND_CAP; i++) {
        pend *p = g->slots[i];
        if (!p || p->link != link) continue;
        p->link = 0;
        if (!p->retried && p->frame) {
            p->retried = 1;
            p->link = ilinks_send(g->links, p->js->job_id, p->frame, link);
            if (p->link) continue;
        }
        if (p->t.cold_start_ms && p->frame && p->frame->len >= IF_HEAD) { /* its last replica drained as it came (scale to
                                                                              zero): it waits for the next one */
            if_head h;
            if (if_head_decode((const unsigned char *)p->frame->data, &h) == 0 && h.len == p->frame->len - IF_HEAD) {
                ilink_frame *f = p->frame;
                p->frame = NULL;
                wait_cold(p, &p->t);
                send_queued(g, p, h.arg, f->data + IF_HEAD, h.len);
                ilink_frame_unref(f);
                continue;
            }
        }
        finish_error(p, GERR_UNAVAILABLE, "the connection to the model's replica dropped while it had the request; retry");
    }
}

void infer_forward(infer_gw *g, http_ctx *c, const infer_target *t, const char *body, size_t len)
{
    uint64_t seq = ++g->seq;
    if (g->slots[seq & (PEND_CAP - 1)]) {
        http_error(c, GERR_UNAVAILABLE, NULL, "too many inference requests in flight on this server (%d); retry", PEND_CAP);
        return;
    }
    pend *p = xcalloc(1, sizeof(*p));
    p->g = g, p->seq = seq, p->js = stats_for(g, t), p->t0_us = clock_mono_us(), p->t = *t;
    p->js->pending++;
    p->defer = http_defer_begin(c);
    uv_timer_init(g->srv->loop, &p->timer);
    p->timer.data = p;
    uv_timer_start(&p->timer, on_timeout, (uint64_t)t->timeout_ms, 0);
    g->slots[seq & (PEND_CAP - 1)] = p;
    p->js->last_req_ms = clock_now_ms();
    if (!admitted(p->js)) { /* shed now rather than answered late: counted as an arrival and a drop */
        p->js->arrivals++, p->js->drops++;
        char msg[300];
        snprintf(msg, sizeof(msg),
                 "the model's replicas are overloaded: this server admits %.1f requests a second for it (what they serve "
                 "within its SLO while the cluster has no room for more); retry later",
                 p->js->admit_rate);
        finish_error_code(p, GERR_RATE_LIMITED, "overloaded", msg);
        return;
    }
    if (forward_direct(g, p, t, c->json_len ? c->json_len : len, body, len)) return;
    if (t->cold_start_ms) wait_cold(p, t); /* no ready replica of a job that scales to zero: one may be starting */
    send_queued(g, p, c->json_len ? c->json_len : len, body, len);
}

/* ---- the (tenant, model) -> serving job cache ---- */

static unsigned cache_slot(const char *tenant, const char *model)
{
    unsigned h = 2166136261u;
    for (const char *p = tenant; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    for (const char *p = model; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    return h % CACHE_SIZE;
}

const infer_target *infer_cached(infer_gw *g, const char *tenant, const char *model)
{
    cache_entry *e = &g->cache[cache_slot(tenant, model)];
    return e->until_ms > clock_now_ms() && !strcmp(e->tenant, tenant) && !strcmp(e->model, model) ? &e->t : NULL;
}

void infer_cache_put(infer_gw *g, const char *tenant, const char *model, const infer_target *t)
{
    cache_entry *e = &g->cache[cache_slot(tenant, model)];
    snprintf(e->tenant, sizeof(e->tenant), "%s", tenant);
    snprintf(e->model, sizeof(e->model), "%s", model);
    e->t = *t;
    e->until_ms = clock_now_ms() + CACHE_TTL_MS;
}

/* ---- replies ---- */

static void read_replies(infer_gw *g);

static void on_replies(redis_link *l, const redisReply *rep, const char *err, void *priv)
{
    (void)priv;
    infer_gw *g = redis_link_data(l);
    g->reading = 0;
    if (!rep && !err) return; /* disconnected: the link reconnects and its on_up reads again */
    if (rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 1) {
        redisReply *entries = rep->element[0]->element[1];
        for (size_t i = 0; i < entries->elements; i++) {
            redisReply *e = entries->element[i], *fields = e->element[1];
            snprintf(g->last_id, sizeof(g->last_id), "%s", e->element[0]->str);
            if (fields->elements < 2) continue;
            uint64_t seq;
            int status;
            const char *body;
            size_t blen;
            pend *p = iw_reply_parse(fields->element[1]->str, fields->element[1]->len, &seq, &status, &body, &blen) == 0
                          ? lookup(g, seq)
                          : NULL; /* a malformed reply: its request times out */
            if (p) finish(p, status, body, blen);
        }
    }
    read_replies(g);
}

static void read_replies(infer_gw *g)
{
    if (!redis_link_up(g->rx) || g->reading || g->srv->stopping) return;
    if (redis_link_cmd(g->rx, on_replies, NULL, "XREAD replies", "XREAD COUNT %d BLOCK 1000 STREAMS %s %s", REPLY_BATCH, g->replies,
                       g->last_id) == 0)
        g->reading = 1;
}

/* ---- connections and the periodic flush ---- */

static void on_loaded(redis_link *l, const redisReply *rep, const char *err, void *priv)
{
    (void)err, (void)priv;
    infer_gw *g = redis_link_data(l);
    if (rep && rep->type == REDIS_REPLY_STRING) snprintf(g->sha, sizeof(g->sha), "%s", rep->str);
    /* else (logged): requests keep sending EVAL with the whole script */
}

static void on_tx_up(redis_link *l, void *data)
{
    infer_gw *g = data;
    g->sha[0] = '\0';
    redis_link_cmd(l, on_loaded, NULL, "SCRIPT LOAD infer_enqueue", "SCRIPT LOAD %s", lua_infer_enqueue);
}

static void on_rx_up(redis_link *l, void *data)
{
    (void)l;
    read_replies(data);
}

typedef struct {
    char job_id[48], event_id[48];
    int64_t ts;
    json_t *metrics;
} point_op;

static int apply_point(sqlite3 *db, void *arg)
{
    point_op *op = arg;
    return jobs_add_metrics(db, op->job_id, op->event_id, op->ts, op->metrics);
}

static void point_done(void *arg, int ok)
{
    point_op *op = arg;
    (void)ok;
    json_decref(op->metrics);
    free(op);
}

/* one metrics point per job that had traffic since the last flush */
static void flush(infer_gw *g, int64_t now)
{
    for (int i = 0; i < g->njobs; i++) {
        jstats *js = g->jobs[i];
        counts *w = &js->win;
        double dt = (double)(now - js->win_start_ms) / 1000.0;
        if (w->n == 0 || dt <= 0) continue;
        unsigned long long judged = w->ok + w->drops + w->timeouts;
        json_t *m =
            json_pack("{s:I, s:f, s:f, s:f, s:f, s:f, s:I, s:I, s:I, s:f}", "requests", (json_int_t)w->n, "rate", (double)w->n / dt,
                      "p50_ms", percentile(w, 0.50), "p95_ms", percentile(w, 0.95), "p99_ms", percentile(w, 0.99), "slo_attainment",
                      judged ? (double)w->slo_ok / (double)judged : 1.0, "drops", (json_int_t)w->drops, "timeouts",
                      (json_int_t)w->timeouts, "errors", (json_int_t)w->errors, "slo_ms", js->slo_ms);
        int ready, out = ilinks_outstanding(g->links, js->job_id, &ready); /* waiting beyond one in each replica's hands */
        json_object_set_new(m, "queued", json_integer(out > ready ? out - ready : 0));
        json_object_set_new(m, "ts", json_integer(now));
        char *s = json_dumps(m, JSON_COMPACT);
        if (s) /* for the autoscaler: the latest window as seen by this server (not sent while the link is down) */
            redis_link_cmd(g->tx, NULL, NULL, "HSET stats", "HSET %s%s server:%s %s", K_INFER_STATS_PREFIX, js->job_id, g->sid, s);
        json_t *ev = json_pack("{s:s, s:n, s:s, s:s, s:I, s:n, s:O}", "job_id", js->job_id, "state", "reason", "serving", "source",
                               "server", "ts", (json_int_t)now, "progress", "metrics", m);
        char *evs = json_dumps(ev, JSON_COMPACT);
        if (evs) sse_publish(g->srv->sse, js->tenant, "job", evs);
        free(evs);
        json_decref(ev);
        free(s);
        point_op *op = xcalloc(1, sizeof(*op));
        snprintf(op->job_id, sizeof(op->job_id), "%s", js->job_id);
        id_random("m", 10, op->event_id, sizeof(op->event_id));
        op->ts = now, op->metrics = m;
        store_submit(g->srv->store, apply_point, point_done, op);
        memset(w, 0, sizeof(*w));
        js->win_start_ms = now;
    }
    if (g->last_id[0] && strcmp(g->last_id, "0") != 0) /* replies already read */
        redis_link_cmd(g->tx, NULL, NULL, "XTRIM", "XTRIM %s MINID %s", g->replies, g->last_id);
}

/* HGETALL gantry:infer:ep:<job>: the job's endpoints, "<host> <port> <token> <attempt>" per worker */
static void on_endpoints(redis_link *l, const redisReply *rep, const char *err, void *priv)
{
    (void)err; /* logged by the link */
    infer_gw *g = redis_link_data(l);
    char *job_id = priv;
    if (rep && rep->type == REDIS_REPLY_ARRAY && !g->srv->stopping) {
        const char *eps[64];
        int n = 0;
        for (size_t i = 1; i < rep->elements && n < 64; i += 2)
            if (rep->element[i]->type == REDIS_REPLY_STRING) eps[n++] = rep->element[i]->str;
        ilinks_set(g->links, job_id, eps, n);
    }
    free(job_id);
}

/* GET gantry:infer:admit:<job>: the rate this server admits while the job is overloaded (none: every request) */
static void on_admit(redis_link *l, const redisReply *rep, const char *err, void *priv)
{
    (void)err; /* logged by the link */
    infer_gw *g = redis_link_data(l);
    char *job_id = priv;
    for (int i = 0; rep && i < g->njobs; i++) {
        jstats *js = g->jobs[i];
        if (strcmp(js->job_id, job_id) != 0) continue;
        double rate = rep->type == REDIS_REPLY_STRING ? atof(rep->str) : 0;
        if (rate > 0 && js->admit_rate <= 0) js->admit_tokens = 1, js->admit_us = clock_mono_us(); /* starts with one */
        js->admit_rate = rate > 0 ? rate : 0;
    }
    free(job_id);
}

/* every job with traffic: its endpoints and admission read again, its direct arrivals and drops counted in Redis */
static void follow_jobs(infer_gw *g, int64_t now)
{
    for (int i = 0; i < g->njobs; i++) {
        jstats *js = g->jobs[i];
        if (now - js->last_req_ms > EP_IDLE_MS) continue;
        if (now >= js->ep_next_ms) {
            char *job_id = xstrdup(js->job_id);
            if (redis_link_cmd(g->tx, on_endpoints, job_id, "HGETALL endpoints", "HGETALL %s%s", K_INFER_EP_PREFIX, js->job_id) !=
                0)
                free(job_id);
            job_id = xstrdup(js->job_id);
            if (redis_link_cmd(g->tx, on_admit, job_id, "GET admit", "GET %s%s", K_INFER_ADMIT_PREFIX, js->job_id) != 0)
                free(job_id);
            js->ep_next_ms = now + EP_EVERY_MS;
        }
        if (js->arrivals)
            redis_link_cmd(g->tx, NULL, NULL, "HINCRBY arrivals", "HINCRBY %s%s arrivals %lld", K_INFER_STATS_PREFIX, js->job_id,
                           js->arrivals);
        if (js->drops)
            redis_link_cmd(g->tx, NULL, NULL, "HINCRBY drops", "HINCRBY %s%s drops %lld", K_INFER_STATS_PREFIX, js->job_id,
                           js->drops);
        js->arrivals = js->drops = 0;
    }
}

static void on_tick(uv_timer_t *t)
{
    infer_gw *g = t->data;
    if (g->srv->stopping) return;
    if (redis_link_up(g->tx)) follow_jobs(g, clock_now_ms());
    int64_t now = clock_now_ms();
    if (now - g->last_flush_ms >= INFER_FLUSH_MS) {
        flush(g, now);
        g->last_flush_ms = now;
    }
}

infer_gw *infer_create(server *srv, const char *host, int port, const redis_auth *auth, int max_jobs)
{
    infer_gw *g = xcalloc(1, sizeof(*g));
    g->max_jobs = max_jobs > 0 ? max_jobs : 1024;
    g->srv = srv;
    if (auth) g->auth = *auth;
    id_random("s", 8, g->sid, sizeof(g->sid));
    snprintf(g->replies, sizeof(g->replies), "%s%s", K_INFER_REPLIES_PREFIX, g->sid);
    snprintf(g->last_id, sizeof(g->last_id), "0");
    g->last_flush_ms = clock_now_ms();
    g->links = ilinks_create(srv->loop, on_direct_reply, on_link_lost, g);
    uv_timer_init(srv->loop, &g->tick);
    g->tick.data = g;
    uv_timer_start(&g->tick, on_tick, 0, 200);
    g->tx = redis_link_open(srv->loop, host, port, &g->auth, "inference requests", 200, on_tx_up, NULL, g);
    g->rx = redis_link_open(srv->loop, host, port, &g->auth, "inference replies", 200, on_rx_up, NULL, g);
    return g;
}

void infer_render_metrics(infer_gw *g, FILE *out)
{
    fprintf(out, "# HELP gantry_inference_requests_total Inference requests by job and outcome.\n"
                 "# TYPE gantry_inference_requests_total counter\n");
    for (int i = 0; i < g->njobs; i++) {
        counts *c = &g->jobs[i]->total;
        const char *job = g->jobs[i]->job_id;
        fprintf(out, "gantry_inference_requests_total{job=\"%s\",outcome=\"ok\"} %llu\n", job, c->ok);
        fprintf(out, "gantry_inference_requests_total{job=\"%s\",outcome=\"dropped\"} %llu\n", job, c->drops);
        fprintf(out, "gantry_inference_requests_total{job=\"%s\",outcome=\"timeout\"} %llu\n", job, c->timeouts);
        fprintf(out, "gantry_inference_requests_total{job=\"%s\",outcome=\"error\"} %llu\n", job, c->errors);
    }
    fprintf(out, "# HELP gantry_inference_slo_met_total Inference requests answered within their job's SLO latency.\n"
                 "# TYPE gantry_inference_slo_met_total counter\n");
    for (int i = 0; i < g->njobs; i++)
        fprintf(out, "gantry_inference_slo_met_total{job=\"%s\"} %llu\n", g->jobs[i]->job_id, g->jobs[i]->total.slo_ok);
    fprintf(out, "# HELP gantry_inference_latency_seconds Latency of answered inference requests (server side).\n"
                 "# TYPE gantry_inference_latency_seconds histogram\n");
    for (int i = 0; i < g->njobs; i++) {
        counts *c = &g->jobs[i]->total;
        unsigned long long cum = 0;
        for (int b = 0; b < NBUCKETS - 1; b += 4) { /* every fourth bucket keeps the label set small */
            for (int k = b; k < b + 4 && k < NBUCKETS - 1; k++)
                cum += c->hist[k];
            int top = b + 3 < NBUCKETS - 1 ? b + 3 : NBUCKETS - 2;
            fprintf(out, "gantry_inference_latency_seconds_bucket{job=\"%s\",le=\"%.6g\"} %llu\n", g->jobs[i]->job_id,
                    bucket_ms(top) / 1000.0, cum);
        }
        fprintf(out, "gantry_inference_latency_seconds_bucket{job=\"%s\",le=\"+Inf\"} %llu\n", g->jobs[i]->job_id, c->ok);
        fprintf(out, "gantry_inference_latency_seconds_sum{job=\"%s\"} %.6f\n", g->jobs[i]->job_id, c->sum_ms / 1000.0);
        fprintf(out, "gantry_inference_latency_seconds_count{job=\"%s\"} %llu\n", g->jobs[i]->job_id, c->ok);
    }
}

void infer_close(infer_gw *g)
{
    if (!g) return;
    uv_timer_stop(&g->tick);
    uv_close((uv_handle_t *)&g->tick, NULL);
    for (int i = 0; i < PEND_CAP; i++)
        if (g->slots[i]) finish_error(g->slots[i], GERR_UNAVAILABLE, "the server is stopping");
    ilinks_close(g->links);
    g->links = NULL;
    redis_link_close(g->tx, false);
    redis_link_close(g->rx, false);
    g->tx = g->rx = NULL;
    for (int i = 0; i < g->njobs; i++)
        free(g->jobs[i]);
    free(g->jobs);
    g->jobs = NULL, g->njobs = 0;
    /* g itself is freed by the caller after the loop closed the handles */
}
