/* api_cluster.c - what tenants see of the shared workers: GET /v1/workers (the
 * registry), GET /v1/cluster (workers, slots per tenant against quota, queue depths)
 * and GET /v1/cluster/timeline (busy intervals per worker).
 * A member sees its own tenant by name and every other tenant folded into "other",
 * and never another tenant's job id or name; admins see every tenant. */
#include "common/clock.h"
#include "common/alloc.h"
#include "server/api.h"
#include "server/bus.h"
#include "server/jobs.h"

#include <stdlib.h>
#include <string.h>

static bool is_admin(const auth_info *a)
{
    return a->role == ROLE_ADMIN;
}

/* the tenant id as the caller may see it */
static const char *visible_tenant(const auth_info *a, const char *tenant)
{
    return is_admin(a) || strcmp(tenant, a->tenant_id) == 0 ? tenant : "other";
}

typedef struct {
    http_defer *defer;
    auth_info auth;
} cluster_req;

/* whether job_id is a job of the caller's tenant (admins: every job); an unknown job is not */
static bool own_job(sqlite3 *db, const auth_info *a, const char *job_id)
{
    return is_admin(a) || jobs_of_tenant(db, job_id, a->tenant_id);
}

/* GET /v1/workers: each worker as it registered itself, with "running" (a job id or
 * null) and "state" ("idle", "busy"); a worker busy with another tenant's job is
 * "busy (other tenant)" with "running": null, as little as /v1/cluster tells */
static void workers_done(void *arg, json_t *workers)
{
    cluster_req *r = arg;
    http_ctx *c = http_defer_ctx(r->defer);
    if (c && !workers) {
        http_error(c, GERR_UNAVAILABLE, NULL, "the worker registry (Redis) is unreachable");
    } else if (c) {
        size_t i;
        json_t *w;
        json_array_foreach(json_object_get(workers, "workers"), i, w)
        {
            const char *running = json_string_value(json_object_get(w, "running"));
            if (!running || own_job(c->srv->db, &r->auth, running)) continue;
            json_object_set_new(w, "running", json_null());
            json_object_set_new(w, "state", json_string("busy (other tenant)"));
        }
        http_reply_json(c, 200, json_incref(workers));
    }
    json_decref(workers);
    http_defer_end(r->defer);
    free(r);
}

/* reads the worker registry from Redis and answers the request in done (deferred) */
static void ask_workers(http_ctx *c, bus_workers_cb done)
{
    cluster_req *r = xmalloc(sizeof(*r));
    r->auth = c->auth;
    r->defer = http_defer_begin(c);
    bus_workers(c->srv->bus, done, r);
}

void api_workers(http_ctx *c)
{
    ask_workers(c, workers_done);
}

/* adds {"job_id","type","tenant","mine"} to each busy worker, from SQLite; counts the busy
 * workers per tenant id into slots ({"<tenant id>": n}): a worker runs one task at a time */
static void annotate_workers(sqlite3 *db, const auth_info *a, json_t *workers, json_t *slots)
{
    size_t i;
    json_t *w;
    json_array_foreach(workers, i, w)
    {
        json_t *running = json_object_get(w, "running");
        if (!json_is_string(running)) continue;
        char type[16], tenant[48];
        int found = jobs_type_and_tenant(db, json_string_value(running), type, sizeof(type), tenant, sizeof(tenant));
        if (found < 0) continue;
        json_t *info = json_null();
        if (found == 0) {
            bool mine = is_admin(a) || strcmp(tenant, a->tenant_id) == 0;
            info = json_pack("{s:o, s:s, s:s, s:b}", "job_id", mine ? json_incref(running) : json_null(), "type", type, "tenant",
                             visible_tenant(a, tenant), "mine", strcmp(tenant, a->tenant_id) == 0);
            json_object_set_new(slots, tenant, json_integer(json_integer_value(json_object_get(slots, tenant)) + 1));
        }
        json_object_set_new(w, "running", info);
    }
}

static json_t *tenant_row(const jobs_tenant_usage *u, json_int_t used)
{
    json_t *row = json_pack("{s:s, s:s, s:I, s:I, s:I, s:f}", "id", u->id, "name", u->name, "slots_used", used, "queued",
                            (json_int_t)u->queued, "running", (json_int_t)u->running, "weight", u->weight);
    json_object_set_new(row, "max_slots", u->max_slots < 0 ? json_null() : json_integer(u->max_slots));
    return row;
}

typedef struct {
    const auth_info *a;
    const json_t *slots; /* busy workers per tenant id (annotate_workers) */
    json_t *list;
    json_int_t other_used, other_queued, other_running;
} tenants_acc;

static void tenant_usage(void *arg, const jobs_tenant_usage *u)
{
    tenants_acc *acc = arg;
    /* slots in use: the workers running the tenant's tasks now, as the registry says (what the
     * scheduler counts against max_slots), so that the tenants' slots never add up to more
     * than the cluster has */
    json_int_t used = json_integer_value(json_object_get(acc->slots, u->id));
    if (is_admin(acc->a) || strcmp(u->id, acc->a->tenant_id) == 0) {
        json_array_append_new(acc->list, tenant_row(u, used));
    } else {
        acc->other_used += used;
        acc->other_queued += u->queued;
        acc->other_running += u->running;
    }
}

static json_t *tenants_json(sqlite3 *db, const auth_info *a, const json_t *slots)
{
    tenants_acc acc = {a, slots, json_array(), 0, 0, 0};
    jobs_usage_by_tenant(db, tenant_usage, &acc);
    if (!is_admin(a))
        json_array_append_new(acc.list, json_pack("{s:s, s:s, s:I, s:I, s:I, s:n, s:n}", "id", "other", "name", "other tenants",
                                                  "slots_used", acc.other_used, "queued", acc.other_queued, "running",
                                                  acc.other_running, "max_slots", "weight"));
    return acc.list;
}

static json_t *queue_json(sqlite3 *db)
{
    long long q, s, r;
    if (jobs_queue_counts(db, &q, &s, &r) != 0) return json_object();
    return json_pack("{s:I, s:I, s:I}", "queued", (json_int_t)q, "scheduled", (json_int_t)s, "running", (json_int_t)r);
}

static void cluster_done(void *arg, json_t *workers)
{
    cluster_req *r = arg;
    http_ctx *c = http_defer_ctx(r->defer);
    if (c && !workers) {
        http_error(c, GERR_UNAVAILABLE, NULL, "the worker registry (Redis) is unreachable");
    } else if (c) {
        json_t *list = json_object_get(workers, "workers"), *slots = json_object();
        annotate_workers(c->srv->db, &r->auth, list, slots);
        char now[32];
        clock_iso8601(clock_now_ms(), now, sizeof(now));
        http_reply_json(c, 200,
                        json_pack("{s:s, s:O, s:o, s:o}", "now", now, "workers", list, "tenants",
                                  tenants_json(c->srv->db, &r->auth, slots), "queue", queue_json(c->srv->db)));
        json_decref(slots);
    }
    json_decref(workers);
    http_defer_end(r->defer);
    free(r);
}

void api_cluster(http_ctx *c)
{
    ask_workers(c, cluster_done);
}

typedef struct {
    const auth_info *a;
    int64_t from;
    json_t *intervals;
} timeline_acc;

static void interval_json(void *arg, const jobs_interval *iv)
{
    timeline_acc *acc = arg;
    char start[32], end[32];
    clock_iso8601(iv->started_at < acc->from ? acc->from : iv->started_at, start, sizeof(start));
    bool open = iv->finished_at < 0;
    if (!open) clock_iso8601(iv->finished_at, end, sizeof(end));
    bool mine = acc->a->role == ROLE_ADMIN || strcmp(iv->tenant_id, acc->a->tenant_id) == 0;
    json_array_append_new(acc->intervals,
                          json_pack("{s:s, s:s, s:o, s:s, s:s, s:o}", "worker", iv->worker, "start", start, "end",
                                    open ? json_null() : json_string(end), "type", iv->type, "tenant",
                                    visible_tenant(acc->a, iv->tenant_id), "job_id", mine ? json_string(iv->id) : json_null()));
}

void api_cluster_timeline(http_ctx *c)
{
    const char *m = http_query(c, "minutes");
    long minutes = 15;
    if (m) {
        char *end;
        minutes = strtol(m, &end, 10);
        if (*end || minutes < 1 || minutes > 1440) {
            http_error(c, GERR_INVALID_FIELD, "minutes", "must be an integer from 1 to 1440");
            return;
        }
    }
    int64_t now = clock_now_ms(), from = now - minutes * 60000;
    timeline_acc acc = {&c->auth, from, json_array()};
    if (jobs_each_interval(c->srv->db, from, interval_json, &acc) != 0) {
        json_decref(acc.intervals);
        http_error(c, GERR_INTERNAL, NULL, "database error");
        return;
    }
    json_t *intervals = acc.intervals;
    char f[32], t[32];
    clock_iso8601(from, f, sizeof(f));
    clock_iso8601(now, t, sizeof(t));
    http_reply_json(c, 200, json_pack("{s:s, s:s, s:o}", "from", f, "to", t, "intervals", intervals));
}
