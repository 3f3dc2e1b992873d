/* bus.c - the server's side of Redis: the outbox of tasks, the events stream read into SQLite (bus.h). */
#include "server/bus.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "wire/keys.h"
#include "common/log.h"
#include "wire/lua_scripts.h"
#include "wire/redis_link.h"
#include "common/ids.h"
#include "common/jobstate.h"
#include "server/db.h"
#include "server/jobs.h"
#include "server/models.h"
#include "server/search.h"
#include "server/server.h"
#include "server/sse.h"
#include "server/tenants.h"

#include <stdlib.h>
#include <string.h>

#define BUS_TICK_MS 500
#define SWEEP_EVERY_MS 2000
#define SWEEP_MIN_AGE_MS 1000 /* younger unpublished jobs are probably being published right now */
#define READ_COUNT 512

struct bus {
    server *srv;
    char consumer[64];
    redis_auth auth;
    redis_link *cmd, *rd; /* commands (outbox, cancel keys, registry, logs reads); the blocking XREADGROUP */
    int backlog;          /* reading our own pending entries (ID 0) before new ones (>) */
    int read_waiting;     /* a read must be re-issued by the tick (after an error) */
    int64_t last_sweep_ms;
    uv_timer_t tick;
    long long len_jobs, len_events;
    unsigned long long published, consumed, duplicates;
    long sweeping; /* publications of the last sweep not yet marked published: no new sweep meanwhile */
    int owed;      /* cancel keys the last sweep set again (logged when it changes, not every 2 s of an outage) */
};

/* ---- connections ---- */

static void read_next(bus *b);
static void sweep(bus *b, int64_t before_ms);
static void cancel_cb(void *arg, const char *job_id);

static void ensure_group(redis_link *l)
{
    /* from 0: events written before the group existed (a wiped Redis) are still read; BUSYGROUP: it exists */
    redis_link_cmd_expect(l, NULL, NULL, "XGROUP CREATE", "BUSYGROUP", "XGROUP CREATE %s %s 0 MKSTREAM", K_EVENTS_STREAM,
                          K_SERVER_GROUP);
}

static int apply_republish(sqlite3 *db, void *arg)
{
    (void)arg;
    return jobs_mark_all_unpublished(db);
}

static void republish_done(void *arg, int ok)
{
    bus *b = arg;
    if (ok) sweep(b, INT64_MAX);
}

/* SET NX of the epoch answered OK: this Redis had never seen us, or lost its data.
 * Every unfinished job is published again (workers fence themselves when their
 * registration vanished, so nothing runs twice at once; see workers/main.c). */
static void on_epoch(redis_link *l, const redisReply *reply, const char *err, void *priv)
{
    (void)err, (void)priv;
    bus *b = redis_link_data(l);
    if (!reply || reply->type != REDIS_REPLY_STATUS) {
        /* nil: the epoch is there, publish only what is still unpublished; no reply or an error (logged):
         * the same, and the next connect asks again */
        sweep(b, INT64_MAX);
        return;
    }
    log_warn("redis: no epoch key (new or wiped Redis): republishing every unfinished job");
    store_submit(b->srv->store, apply_republish, republish_done, b);
}

static void on_cmd_up(redis_link *l, void *data)
{
    bus *b = data;
    ensure_group(l);
    bus_sync_tenants(b);
    char epoch[40];
    id_random("epoch", 8, epoch, sizeof(epoch));
    redis_link_cmd(l, on_epoch, NULL, "SET epoch", "SET %s %s NX", K_EPOCH, epoch);
}

/* one tenant's weight and slot quota into the tenants hash (tenants_each_share's fn) */
static void put_share(void *arg, const char *id, double weight, long long max_slots)
{
    bus *b = arg;
    json_t *o = json_pack("{s:f}", "weight", weight);
    json_object_set_new(o, "max_slots", max_slots < 0 ? json_null() : json_integer(max_slots));
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    redis_link_cmd(b->cmd, NULL, NULL, "HSET tenants", "HSET %s %s %s", K_TENANTS_HASH, id, s);
    free(s);
}

void bus_sync_tenants(bus *b)
{
    if (!redis_link_up(b->cmd)) return;
    tenants_each_share(b->srv->db, put_share, b);
}

static void on_rd_up(redis_link *l, void *data)
{
    bus *b = data;
    b->backlog = 1;
    ensure_group(l);
    read_next(b);
}

static void on_len(redis_link *l, const redisReply *reply, const char *err, void *priv)
{
    (void)l, (void)err;
    if (reply && reply->type == REDIS_REPLY_INTEGER) *(long long *)priv = reply->integer;
}

static void on_tick(uv_timer_t *t)
{
    bus *b = t->data;
    if (b->srv->stopping) return;
    if (redis_link_up(b->rd) && b->read_waiting) {
        b->read_waiting = 0;
        read_next(b);
    }
    int64_t now = clock_now_ms();
    if (redis_link_up(b->cmd) && now - b->last_sweep_ms >= SWEEP_EVERY_MS) {
        /* a long backlog (a wiped Redis, 100,000 unfinished jobs) takes more than one tick to publish and
         * mark: sweeping again before the marks land would publish all of it again */
        if (b->sweeping <= 0)
            sweep(b, now - SWEEP_MIN_AGE_MS);
        else
            b->last_sweep_ms = now;
        redis_link_cmd(b->cmd, on_len, &b->len_jobs, "XLEN", "XLEN %s", K_JOBS_STREAM);
        redis_link_cmd(b->cmd, on_len, &b->len_events, "XLEN", "XLEN %s", K_EVENTS_STREAM);
    }
}

bus *bus_create(server *srv, const char *host, int port, const redis_auth *auth, const char *consumer)
{
    bus *b = xcalloc(1, sizeof(*b));
    b->srv = srv;
    if (auth) b->auth = *auth;
    snprintf(b->consumer, sizeof(b->consumer), "%s", consumer);
    b->cmd = redis_link_open(srv->loop, host, port, &b->auth, "commands", BUS_TICK_MS, on_cmd_up, NULL, b);
    b->rd = redis_link_open(srv->loop, host, port, &b->auth, "events", BUS_TICK_MS, on_rd_up, NULL, b);
    b->len_jobs = b->len_events = -1;
    uv_timer_init(srv->loop, &b->tick);
    b->tick.data = b;
    uv_timer_start(&b->tick, on_tick, 0, BUS_TICK_MS);
    return b;
}

bool bus_ready(const bus *b)
{
    return redis_link_up(b->cmd) && redis_link_up(b->rd);
}

redis_link *bus_redis(bus *b)
{
    return b->cmd;
}

/* ---- outbox ---- */

typedef struct {
    bus *b;
    char job_id[MSG_ID_LEN];
    bool swept; /* published by a sweep */
} publish_ctx;

static int apply_published(sqlite3 *db, void *arg)
{
    return jobs_mark_published(db, ((publish_ctx *)arg)->job_id);
}

static void free_ctx(void *arg, int ok)
{
    (void)ok;
    publish_ctx *p = arg;
    if (p->swept) p->b->sweeping--;
    free(p);
}

static void on_xadd(redis_link *l, const redisReply *reply, const char *err, void *priv)
{
    (void)l, (void)err;
    publish_ctx *p = priv;
    if (reply && reply->type == REDIS_REPLY_STRING) {
        p->b->published++;
        store_submit(p->b->srv->store, apply_published, free_ctx, p);
        return;
    }
    free_ctx(p, 0); /* an error was logged with the command; the job stays unpublished and the sweep retries */
}

static void publish(bus *b, const task_msg *t, bool swept)
{
    if (!redis_link_up(b->cmd)) return; /* stays unpublished; the next connect or sweep publishes it */
    char *s = msg_task_encode(t);
    if (!s) { /* a task jansson cannot encode (not memory: common/alloc.h); it stays unpublished */
        log_error("outbox: cannot encode job %s", t->job_id);
        return;
    }
    publish_ctx *p = xmalloc(sizeof(*p));
    p->b = b;
    snprintf(p->job_id, sizeof(p->job_id), "%s", t->job_id);
    p->swept = swept;
    b->sweeping += swept;
    if (redis_link_cmd(b->cmd, on_xadd, p, "XADD jobs", "XADD %s MAXLEN ~ %d * %s %b", K_JOBS_STREAM, K_STREAM_MAXLEN, F_JOB, s,
                       strlen(s)) != 0)
        free_ctx(p, 0);
    free(s);
}

void bus_publish_job(bus *b, const task_msg *t)
{
    publish(b, t, false);
}

static void publish_cb(void *arg, const task_msg *t)
{
    publish(arg, t, true);
}

static void sweep(bus *b, int64_t before_ms)
{
    b->last_sweep_ms = clock_now_ms();
    int64_t after = 0, last;
    int rounds = 0;
    while ((last = jobs_each_unpublished(b->srv->db, after, before_ms, 1000, publish_cb, b)) != after && ++rounds < 100)
        after = last;
    if (after > 0) log_info("outbox: republished unpublished jobs up to seq %lld", (long long)after);
    /* the cancel keys a crash (or Redis, down or refusing) left unset: a cancelled job's worker would run it to its end */
    int n = jobs_each_cancel_unset(b->srv->db, before_ms, 1000, cancel_cb, b);
    if (n > 0 && n != b->owed) log_info("outbox: setting %d cancel keys again (owed since a restart or a Redis error)", n);
    if (n >= 0) b->owed = n;
}

/* ---- cancel keys: an outbox of their own (jobs_cancel_key_set, migrations/0011_cancel_outbox.sql) ---- */

typedef struct {
    bus *b;
    char job_id[MSG_ID_LEN];
} cancel_ctx;

static int apply_cancel_set(sqlite3 *db, void *arg)
{
    return jobs_cancel_key_set(db, ((cancel_ctx *)arg)->job_id);
}

static void cancel_ctx_free(void *arg, int ok)
{
    (void)ok; /* not deleted: the next sweep sets the key again, which changes nothing */
    free(arg);
}

static void on_cancel_set(redis_link *l, const redisReply *reply, const char *err, void *priv)
{
    (void)l, (void)err;
    cancel_ctx *c = priv;
    if (reply) { /* Redis has it: no longer owed */
        store_submit(c->b->srv->store, apply_cancel_set, cancel_ctx_free, c);
        return;
    }
    free(c); /* refused (logged with the command) or the link went down: the row stays for the sweep */
}

void bus_cancel(bus *b, const char *job_id)
{
    cancel_ctx *c = xmalloc(sizeof(*c));
    c->b = b;
    snprintf(c->job_id, sizeof(c->job_id), "%s", job_id);
    if (redis_link_cmd(b->cmd, on_cancel_set, c, "SET cancel", "SET %s%s 1 EX 86400", K_CANCEL_PREFIX, job_id) != 0)
        free(c); /* down: the row stays; the next connect's sweep sets it */
}

static void cancel_cb(void *arg, const char *job_id)
{
    bus_cancel(arg, job_id);
}

static void publish_now(void *arg, const task_msg *t)
{
    publish(arg, t, false);
}

void bus_search_after(bus *b, search_after *a)
{
    size_t i;
    json_t *v;
    json_array_foreach(a->publish, i, v) jobs_task_of(b->srv->db, json_string_value(v), publish_now, b);
    json_array_foreach(a->cancel, i, v) bus_cancel(b, json_string_value(v));
    json_array_foreach(a->events, i, v)
    {
        json_t *o = json_pack("{s:O, s:O, s:O, s:s}", "job_id", json_object_get(v, "job_id"), "state",
                              json_object_get(v, "state") ? json_object_get(v, "state") : json_null(), "reason",
                              json_object_get(v, "reason"), "source", "server");
        char *s = json_dumps(o, JSON_COMPACT);
        json_decref(o);
        if (s) sse_publish(b->srv->sse, json_string_value(json_object_get(v, "tenant")), "job", s);
        free(s);
    }
    json_array_clear(a->publish);
    json_array_clear(a->cancel);
    json_array_clear(a->events);
}

void bus_set_model(bus *b, const char *job_id, const char *resolved_json)
{
    /* a week: replicas read it every half second; a job's key outlives any wait for a replica */
    redis_link_cmd(b->cmd, NULL, NULL, "SET model", "SET %s%s %s EX 604800", K_INFER_MODEL_PREFIX, job_id, resolved_json);
}

/* ---- events ---- */

typedef struct {
    bus *b;
    int n;
    char (*entry_ids)[64];
    event_msg *events;
    apply_result *results;
    char (*tenants)[48];
    search_after after; /* what the search controller decided in the batch's transaction */
} event_batch;

static void batch_free(event_batch *batch)
{
    for (int i = 0; i < batch->n; i++)
        msg_event_clear(&batch->events[i]);
    free(batch->entry_ids);
    free(batch->events);
    free(batch->results);
    free(batch->tenants);
    search_after_clear(&batch->after);
    free(batch);
}

static int apply_batch(sqlite3 *db, void *arg)
{
    event_batch *batch = arg;
    for (int i = 0; i < batch->n; i++) {
        if (!batch->events[i].id[0]) {
            batch->results[i] = APPLY_UNKNOWN_JOB; /* undecodable entry: acknowledged and dropped */
            continue;
        }
        if (jobs_apply_event(db, &batch->events[i], &batch->results[i], batch->tenants[i]) != 0) return -1;
        const event_msg *e = &batch->events[i];
        /* a job that succeeded with a model: the registry's next version, in the same transaction */
        if (batch->results[i] == APPLY_MOVED && e->result && job_state_parse(e->state) == JS_SUCCEEDED &&
            models_register(db, e->job_id, e->result) != 0)
            return -1;
        /* a search's trial: asha's rule at its rungs, its end (server/search.h) */
        if (search_on_event(db, e, batch->results[i], &batch->after) != 0) return -1;
    }
    return 0;
}

static void push_sse(bus *b, const event_msg *e, const char *tenant)
{
    json_t *o = json_pack("{s:s, s:o, s:s, s:s, s:I}", "job_id", e->job_id, "state",
                          e->state[0] ? json_string(e->state) : json_null(), /* null: the event only reports progress */
                          "reason", e->reason, "source", e->source, "ts", (json_int_t)e->ts);
    json_object_set_new(o, "progress", e->progress >= 0 ? json_real(e->progress) : json_null());
    if (e->metrics) json_object_set(o, "metrics", e->metrics);
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (s) sse_publish(b->srv->sse, tenant, "job", s);
    free(s);
}

static void on_batch_done(void *arg, int ok)
{
    event_batch *batch = arg;
    bus *b = batch->b;
    if (!ok) {
        log_error("events: could not persist a batch of %d; will read them again", batch->n);
        b->backlog = 1;
        b->read_waiting = 1;
        batch_free(batch);
        return;
    }
    if (redis_link_up(b->rd)) {
        const char **argv = xmalloc(sizeof(char *) * (size_t)(batch->n + 3));
        argv[0] = "XACK";
        argv[1] = K_EVENTS_STREAM;
        argv[2] = K_SERVER_GROUP;
        for (int i = 0; i < batch->n; i++)
            argv[3 + i] = batch->entry_ids[i];
        redis_link_cmd_argv(b->rd, NULL, NULL, "XACK", batch->n + 3, argv, NULL);
        free(argv);
    }
    for (int i = 0; i < batch->n; i++) {
        if (batch->results[i] == APPLY_DUPLICATE) b->duplicates++;
        if (batch->results[i] == APPLY_MOVED || batch->results[i] == APPLY_RECORDED)
            push_sse(b, &batch->events[i], batch->tenants[i]);
        /* a failed job stops everywhere, as a cancelled one does: an inference job's other replicas, and the
         * autoscaler, which would otherwise place a replica that cannot load its model again and again
         * (scheduler/autoscaler.c forgets a job with a cancel key and empties its queue) */
        if (batch->results[i] == APPLY_MOVED && strcmp(batch->events[i].state, "failed") == 0)
            bus_cancel(b, batch->events[i].job_id);
    }
    b->consumed += (unsigned long long)batch->n;
    bus_search_after(b, &batch->after);
    batch_free(batch);
    read_next(b);
}

static event_batch *batch_from_reply(bus *b, redisReply *entries)
{
    event_batch *batch = xcalloc(1, sizeof(*batch));
    size_t n = entries->elements;
    batch->b = b;
    batch->entry_ids = xcalloc(n, sizeof(*batch->entry_ids));
    batch->events = xcalloc(n, sizeof(*batch->events));
    batch->results = xcalloc(n, sizeof(*batch->results));
    batch->tenants = xcalloc(n, sizeof(*batch->tenants));
    search_after_init(&batch->after);
    for (size_t i = 0; i < n; i++) {
        redisReply *entry = entries->element[i];
        if (entry->type != REDIS_REPLY_ARRAY || entry->elements < 2 || entry->element[0]->type != REDIS_REPLY_STRING) continue;
        snprintf(batch->entry_ids[batch->n], 64, "%s", entry->element[0]->str);
        redisReply *fields = entry->element[1];
        for (size_t f = 0; fields->type == REDIS_REPLY_ARRAY && f + 1 < fields->elements; f += 2)
            if (strcmp(fields->element[f]->str, F_EVENT) == 0 &&
                msg_event_decode(fields->element[f + 1]->str, &batch->events[batch->n]) != 0)
                log_warn("events: dropping malformed entry %s", entry->element[0]->str);
        batch->n++;
    }
    return batch;
}

static void on_read(redis_link *l, const redisReply *reply, const char *err, void *priv)
{
    (void)priv;
    bus *b = redis_link_data(l);
    if (b->srv->stopping) return;
    if (!reply) {
        if (!err) return;                                     /* disconnected: the connect callback restarts reading */
        if (strncmp(err, "NOGROUP", 7) == 0) ensure_group(l); /* logged with the command */
        b->read_waiting = 1;
        return;
    }
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements == 0) {
        read_next(b); /* BLOCK timed out */
        return;
    }
    redisReply *stream = reply->element[0];
    redisReply *entries = stream->elements >= 2 ? stream->element[1] : NULL;
    if (!entries || entries->type != REDIS_REPLY_ARRAY || entries->elements == 0) {
        b->backlog = 0;
        read_next(b);
        return;
    }
    store_submit(b->srv->store, apply_batch, on_batch_done, batch_from_reply(b, entries));
}

static void read_next(bus *b)
{
    if (!redis_link_up(b->rd) || b->srv->stopping) return;
    redis_link_cmd(b->rd, on_read, NULL, "XREADGROUP events", "XREADGROUP GROUP %s %s COUNT %d BLOCK 2000 STREAMS %s %s",
                   K_SERVER_GROUP, b->consumer, READ_COUNT, K_EVENTS_STREAM, b->backlog ? "0" : ">");
}

/* ---- registry ---- */

typedef struct {
    bus_workers_cb cb;
    void *arg;
} workers_req;

static json_t *worker_json(const char *id, redisReply *h)
{
    json_t *w = json_object();
    json_object_set_new(w, "id", json_string(id));
    const char *running = "";
    for (size_t i = 0; i + 1 < h->elements; i += 2) {
        const char *k = h->element[i]->str, *v = h->element[i + 1]->str;
        if (strcmp(k, "info") == 0) {
            json_t *info = json_loads(v, 0, NULL);
            if (json_is_object(info)) json_object_update(w, info);
            json_decref(info);
        } else if (strcmp(k, "hb") == 0) {
            char iso[32];
            clock_iso8601(strtoll(v, NULL, 10), iso, sizeof(iso));
            json_object_set_new(w, "last_heartbeat", json_string(iso));
        } else if (strcmp(k, "util") == 0) {
            json_object_set_new(w, "utilization", json_real(strtod(v, NULL)));
        } else if (strcmp(k, "running") == 0) {
            running = v;
        }
    }
    json_object_set_new(w, "running", running[0] ? json_string(running) : json_null());
    json_object_set_new(w, "state", json_string(running[0] ? "busy" : "idle"));
    return w;
}

static void on_workers(redis_link *l, const redisReply *reply, const char *err, void *priv)
{
    (void)l, (void)err;
    workers_req *req = priv;
    if (!reply || reply->type != REDIS_REPLY_ARRAY) {
        req->cb(req->arg, NULL);
        free(req);
        return;
    }
    json_t *list = json_array();
    for (size_t i = 0; i + 1 < reply->elements; i += 2)
        if (reply->element[i + 1]->type == REDIS_REPLY_ARRAY)
            json_array_append_new(list, worker_json(reply->element[i]->str, reply->element[i + 1]));
    req->cb(req->arg, json_pack("{s:o}", "workers", list));
    free(req);
}

void bus_workers(bus *b, bus_workers_cb cb, void *arg)
{
    workers_req *req = xmalloc(sizeof(*req));
    *req = (workers_req){cb, arg};
    if (redis_link_cmd(b->cmd, on_workers, req, "EVAL workers_list", "EVAL %s 1 %s %s", lua_workers_list, K_WORKERS_SET,
                       K_WORKER_PREFIX) != 0) {
        free(req);
        cb(arg, NULL);
    }
}

void bus_render_metrics(bus *b, FILE *out)
{
    fprintf(out,
            "# HELP gantry_redis_up Whether both Redis connections are up.\n# TYPE gantry_redis_up gauge\n"
            "gantry_redis_up %d\n"
            "# HELP gantry_outbox_published_total Jobs XADDed to gantry:jobs (republications included).\n"
            "# TYPE gantry_outbox_published_total counter\ngantry_outbox_published_total %llu\n"
            "# HELP gantry_events_consumed_total Entries read from gantry:events.\n"
            "# TYPE gantry_events_consumed_total counter\ngantry_events_consumed_total %llu\n"
            "# HELP gantry_events_duplicate_total Events already persisted (replays), ignored.\n"
            "# TYPE gantry_events_duplicate_total counter\ngantry_events_duplicate_total %llu\n"
            "# HELP gantry_stream_length Entries in a Redis stream (-1 unknown).\n# TYPE gantry_stream_length gauge\n"
            "gantry_stream_length{stream=\"jobs\"} %lld\ngantry_stream_length{stream=\"events\"} %lld\n",
            bus_ready(b) ? 1 : 0, b->published, b->consumed, b->duplicates, b->len_jobs, b->len_events);
}

void bus_close(bus *b)
{
    uv_timer_stop(&b->tick);
    uv_close((uv_handle_t *)&b->tick, NULL);
    redis_link_close(b->cmd, true);
    redis_link_close(b->rd, false); /* it may be blocked in XREADGROUP */
    b->cmd = b->rd = NULL;
}
