/* api_cluster.c - what tenants see of the shared workers: GET /v1/workers (the
 * registry), GET /v1/cluster (workers, slots per tenant against quota, queue depths)
 * and GET /v1/cluster/timeline (busy intervals per worker).
 * A member sees its own tenant by name and every other tenant folded into "other",
 * and never another tenant's job id or name; admins see every tenant. */
#include "common/clock.h"
#include "common/alloc.h"
#include "server/api.h"
#include "server/bus.h"
#include "server/db.h"

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
    if (is_admin(a)) return true;
    sqlite3_stmt *st = db_stmt(db, "SELECT 1 FROM jobs WHERE id = ? AND tenant_id = ?");
    if (!st) return false;
    sqlite3_bind_text(st, 1, job_id, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, a->tenant_id, -1, SQLITE_TRANSIENT);
    bool mine = db_step(st) == SQLITE_ROW;
    db_release(st);
    return mine;
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

/* adds {"job_id","type","tenant","mine"} to each busy worker, from SQLite */
static void annotate_workers(sqlite3 *db, const auth_info *a, json_t *workers)
{
    size_t i;
    json_t *w;
    json_array_foreach(workers, i, w)
    {
        json_t *running = json_object_get(w, "running");
        if (!json_is_string(running)) continue;
        sqlite3_stmt *st = db_stmt(db, "SELECT type, tenant_id FROM jobs WHERE id = ?");
        if (!st) continue;
        sqlite3_bind_text(st, 1, json_string_value(running), -1, SQLITE_TRANSIENT);
        json_t *info = json_null();
        if (db_step(st) == SQLITE_ROW) {
            const char *tenant = (const char *)sqlite3_column_text(st, 1);
            bool mine = is_admin(a) || strcmp(tenant, a->tenant_id) == 0;
            info = json_pack("{s:o, s:s, s:s, s:b}", "job_id", mine ? json_incref(running) : json_null(), "type",
                             (const char *)sqlite3_column_text(st, 0), "tenant", visible_tenant(a, tenant), "mine",
                             strcmp(tenant, a->tenant_id) == 0);
        }
        db_release(st);
        json_object_set_new(w, "running", info);
    }
}

static json_t *tenant_row(sqlite3_stmt *st)
{
    json_t *row =
        json_pack("{s:s, s:s, s:I, s:I, s:I, s:f}", "id", (const char *)sqlite3_column_text(st, 0), "name",
                  (const char *)sqlite3_column_text(st, 1), "slots_used", sqlite3_column_int64(st, 2), "queued",
                  sqlite3_column_int64(st, 3), "running", sqlite3_column_int64(st, 4), "weight", sqlite3_column_double(st, 5));
    json_object_set_new(row, "max_slots",
                        sqlite3_column_type(st, 6) == SQLITE_NULL ? json_null() : json_integer(sqlite3_column_int64(st, 6)));
    return row;
}

static json_t *tenants_json(sqlite3 *db, const auth_info *a)
{
    sqlite3_stmt *st = db_stmt(db, "SELECT t.id, t.name, "
                                   "coalesce(sum(CASE WHEN j.state IN ('scheduled', 'running', 'resizing') THEN j.slots END), 0), "
                                   "count(CASE WHEN j.state = 'queued' THEN 1 END), "
                                   "count(CASE WHEN j.state IN ('running', 'resizing') THEN 1 END), t.weight, t.max_slots "
                                   "FROM tenants t LEFT JOIN jobs j ON j.tenant_id = t.id AND j.state IN ('queued', 'scheduled', "
                                   "'running', 'resizing') GROUP BY t.id ORDER BY t.name");
    json_t *list = json_array();
    json_int_t other_used = 0, other_queued = 0, other_running = 0;
    while (st && db_step(st) == SQLITE_ROW) {
        const char *id = (const char *)sqlite3_column_text(st, 0);
        if (is_admin(a) || strcmp(id, a->tenant_id) == 0) {
            json_array_append_new(list, tenant_row(st));
        } else {
            other_used += sqlite3_column_int64(st, 2);
            other_queued += sqlite3_column_int64(st, 3);
            other_running += sqlite3_column_int64(st, 4);
        }
    }
    db_release(st);
    if (!is_admin(a))
        json_array_append_new(list,
                              json_pack("{s:s, s:s, s:I, s:I, s:I, s:n, s:n}", "id", "other", "name", "other tenants", "slots_used",
                                        other_used, "queued", other_queued, "running", other_running, "max_slots", "weight"));
    return list;
}

static json_t *queue_json(sqlite3 *db)
{
    sqlite3_stmt *st = db_stmt(db, "SELECT count(CASE WHEN state = 'queued' THEN 1 END), "
                                   "count(CASE WHEN state = 'scheduled' THEN 1 END), "
                                   "count(CASE WHEN state IN ('running', 'resizing') THEN 1 END) FROM jobs "
                                   "WHERE state IN ('queued', 'scheduled', 'running', 'resizing')");
    json_t *q = NULL;
    if (st && db_step(st) == SQLITE_ROW)
        q = json_pack("{s:I, s:I, s:I}", "queued", sqlite3_column_int64(st, 0), "scheduled", sqlite3_column_int64(st, 1), "running",
                      sqlite3_column_int64(st, 2));
    db_release(st);
    return q ? q : json_object();
}

static void cluster_done(void *arg, json_t *workers)
{
    cluster_req *r = arg;
    http_ctx *c = http_defer_ctx(r->defer);
    if (c && !workers) {
        http_error(c, GERR_UNAVAILABLE, NULL, "the worker registry (Redis) is unreachable");
    } else if (c) {
        json_t *list = json_object_get(workers, "workers");
        annotate_workers(c->srv->db, &r->auth, list);
        char now[32];
        clock_iso8601(clock_now_ms(), now, sizeof(now));
        http_reply_json(c, 200,
                        json_pack("{s:s, s:O, s:o, s:o}", "now", now, "workers", list, "tenants",
                                  tenants_json(c->srv->db, &r->auth), "queue", queue_json(c->srv->db)));
    }
    json_decref(workers);
    http_defer_end(r->defer);
    free(r);
}

void api_cluster(http_ctx *c)
{
    ask_workers(c, cluster_done);
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
    /* finished within the window, plus whatever runs now */
    sqlite3_stmt *st = db_stmt(c->srv->db, "SELECT worker, started_at, finished_at, type, tenant_id, id FROM jobs "
                                           "WHERE finished_at >= ?1 AND started_at IS NOT NULL AND worker IS NOT NULL "
                                           "UNION ALL "
                                           "SELECT worker, started_at, NULL, type, tenant_id, id FROM jobs "
                                           "WHERE state IN ('running', 'resizing') AND worker IS NOT NULL "
                                           "AND started_at IS NOT NULL ORDER BY 2 LIMIT 20000");
    if (!st) {
        http_error(c, GERR_INTERNAL, NULL, "database error");
        return;
    }
    sqlite3_bind_int64(st, 1, from);
    json_t *intervals = json_array();
    while (db_step(st) == SQLITE_ROW) {
        char start[32], end[32];
        int64_t s = sqlite3_column_int64(st, 1);
        clock_iso8601(s < from ? from : s, start, sizeof(start));
        bool open = sqlite3_column_type(st, 2) == SQLITE_NULL;
        if (!open) clock_iso8601(sqlite3_column_int64(st, 2), end, sizeof(end));
        const char *tenant = (const char *)sqlite3_column_text(st, 4);
        bool mine = c->auth.role == ROLE_ADMIN || strcmp(tenant, c->auth.tenant_id) == 0;
        json_array_append_new(intervals,
                              json_pack("{s:s, s:s, s:o, s:s, s:s, s:o}", "worker", (const char *)sqlite3_column_text(st, 0),
                                        "start", start, "end", open ? json_null() : json_string(end), "type",
                                        (const char *)sqlite3_column_text(st, 3), "tenant", visible_tenant(&c->auth, tenant),
                                        "job_id", mine ? json_string((const char *)sqlite3_column_text(st, 5)) : json_null()));
    }
    db_release(st);
    char f[32], t[32];
    clock_iso8601(from, f, sizeof(f));
    clock_iso8601(now, t, sizeof(t));
    http_reply_json(c, 200, json_pack("{s:s, s:s, s:o}", "from", f, "to", t, "intervals", intervals));
}
