/* jobs.c - the jobs, job_events and job_metrics tables (jobs.h): every SQL statement that reads or
 * writes a job, its events or its metrics points, the aggregates the cluster view and /metrics show
 * included.  It calls no other module of the server but the database helpers: what follows a job's
 * move (a model registered when it succeeded) is the caller's (bus.c). */
#include "server/jobs.h"
#include "server/db.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "common/ids.h"
#include "common/jobstate.h"
#include "common/jobtypes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JOB_COLS                                                                                                                   \
    "seq, id, tenant_id, type, name, priority, state, created_at, updated_at, started_at, finished_at, progress, "                 \
    "worker, error, attempts, spec, result"

static int prep(sqlite3 *db, const char *sql, sqlite3_stmt **st)
{
    *st = db_stmt(db, sql);
    return *st ? 0 : -1;
}

static void bind_text_or_null(sqlite3_stmt *st, int i, const char *s)
{
    if (s && *s)
        sqlite3_bind_text(st, i, s, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(st, i);
}

static int insert_event(sqlite3 *db, const char *event_id, const char *job_id, int64_t ts, const char *state, const char *reason,
                        const char *source, double progress)
{
    sqlite3_stmt *st;
    if (prep(db, "INSERT OR IGNORE INTO job_events (id, job_id, ts, state, reason, source, progress) VALUES (?,?,?,?,?,?,?)",
             &st) != 0)
        return -1;
    sqlite3_bind_text(st, 1, event_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, job_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, ts);
    sqlite3_bind_text(st, 4, state ? state : "", -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, reason ? reason : "", -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 6, source ? source : "", -1, SQLITE_STATIC);
    if (progress >= 0)
        sqlite3_bind_double(st, 7, progress);
    else
        sqlite3_bind_null(st, 7);
    int rc = db_step(st) == SQLITE_DONE ? sqlite3_changes(db) : -1;
    db_release(st);
    return rc; /* 1 inserted, 0 duplicate */
}

static int find_idem(sqlite3 *db, job_new *j)
{
    sqlite3_stmt *st;
    if (prep(db, "SELECT job_id, body_sha256 FROM idempotency_keys WHERE tenant_id = ? AND key = ?", &st) != 0) return -1;
    sqlite3_bind_text(st, 1, j->tenant_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, j->idem, -1, SQLITE_STATIC);
    if (db_step(st) == SQLITE_ROW) {
        snprintf(j->existing, sizeof(j->existing), "%s", (const char *)sqlite3_column_text(st, 0));
        j->idem_mismatch = sqlite3_column_bytes(st, 1) == 32 && memcmp(sqlite3_column_blob(st, 1), j->body_sha256, 32) != 0;
    }
    db_release(st);
    return 0;
}

/* whether the tenant already has max_queued jobs waiting (queued or scheduled): a counter kept by
 * triggers in the transaction of every insert and state change (migrations/0006), never a count */
static int over_queued_quota(sqlite3 *db, const char *tenant, int *over)
{
    sqlite3_stmt *st;
    if (prep(db, "SELECT max_queued, queued_jobs FROM tenants WHERE id = ?", &st) != 0) return -1;
    sqlite3_bind_text(st, 1, tenant, -1, SQLITE_STATIC);
    *over = db_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL &&
            sqlite3_column_int64(st, 1) >= sqlite3_column_int64(st, 0);
    if (*over) *over = (int)sqlite3_column_int64(st, 0) + 1; /* the limit, plus one so that 0 reads as true */
    db_release(st);
    return 0;
}

int jobs_insert(sqlite3 *db, job_new *j)
{
    j->existing[0] = '\0';
    j->over_quota = j->idem_mismatch = 0;
    if (j->idem && (find_idem(db, j) != 0 || j->existing[0])) return j->existing[0] ? 0 : -1;
    if (!j->no_queued_quota && over_queued_quota(db, j->tenant_id, &j->over_quota) != 0) return -1;
    if (j->over_quota) return 0;
    char *spec = json_dumps(j->spec, JSON_COMPACT);
    sqlite3_stmt *st;
    if (!spec || prep(db,
                      "INSERT INTO jobs (id, tenant_id, type, name, priority, slots, state, spec, created_at, "
                      "updated_at, preemptible) VALUES (?,?,?,?,?,?,'queued',?,?,?,?)",
                      &st) != 0) {
        free(spec);
        return -1;
    }
    int64_t now = clock_now_ms();
    sqlite3_bind_text(st, 1, j->id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, j->tenant_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, j->type, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, j->name, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 5, j->priority);
    sqlite3_bind_int(st, 6, j->slots);
    sqlite3_bind_text(st, 7, spec, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 8, now);
    sqlite3_bind_int64(st, 9, now);
    sqlite3_bind_int(st, 10, j->preemptible);
    int rc = db_step(st) == SQLITE_DONE ? 0 : -1;
    db_release(st);
    free(spec);
    char eid[48];
    if (rc == 0 &&
        (id_sortable("e", 10, eid, sizeof(eid)) != 0 || insert_event(db, eid, j->id, now, "queued", "accepted", "server", -1) != 1))
        rc = -1;
    if (rc == 0 && j->idem) {
        if (prep(db, "INSERT INTO idempotency_keys (tenant_id, key, job_id, created_at, body_sha256) VALUES (?,?,?,?,?)", &st) != 0)
            return -1;
        sqlite3_bind_blob(st, 5, j->body_sha256, 32, SQLITE_STATIC);
        sqlite3_bind_text(st, 1, j->tenant_id, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, j->idem, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, j->id, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 4, now);
        rc = db_step(st) == SQLITE_DONE ? 0 : -1;
        db_release(st);
    }
    return rc;
}

/* ---- reading ---- */

static json_t *time_or_null(sqlite3_stmt *st, int col)
{
    if (sqlite3_column_type(st, col) == SQLITE_NULL) return json_null();
    char buf[32];
    clock_iso8601(sqlite3_column_int64(st, col), buf, sizeof(buf));
    return json_string(buf);
}

static json_t *text_or_null(sqlite3_stmt *st, int col)
{
    const unsigned char *v = sqlite3_column_text(st, col);
    return v ? json_string((const char *)v) : json_null();
}

static json_t *parsed_or_null(sqlite3_stmt *st, int col)
{
    const char *v = (const char *)sqlite3_column_text(st, col);
    json_t *j = v ? json_loads(v, 0, NULL) : NULL;
    return j ? j : json_null();
}

/* one row of JOB_COLS as API JSON */
static json_t *row_json(sqlite3_stmt *st, bool full)
{
    json_t *o = json_object();
    json_object_set_new(o, "id", text_or_null(st, 1));
    json_object_set_new(o, "tenant", text_or_null(st, 2));
    json_object_set_new(o, "type", text_or_null(st, 3));
    json_object_set_new(o, "name", text_or_null(st, 4));
    json_object_set_new(o, "priority", json_string(job_priority_name(sqlite3_column_int(st, 5))));
    json_object_set_new(o, "state", text_or_null(st, 6));
    json_object_set_new(o, "created_at", time_or_null(st, 7));
    json_object_set_new(o, "updated_at", time_or_null(st, 8));
    json_object_set_new(o, "started_at", time_or_null(st, 9));
    json_object_set_new(o, "finished_at", time_or_null(st, 10));
    json_object_set_new(o, "progress",
                        sqlite3_column_type(st, 11) == SQLITE_NULL ? json_null() : json_real(sqlite3_column_double(st, 11)));
    json_object_set_new(o, "worker", text_or_null(st, 12));
    json_object_set_new(o, "error", text_or_null(st, 13));
    json_object_set_new(o, "attempts", json_integer(sqlite3_column_int(st, 14)));
    if (full) {
        json_object_set_new(o, "spec", parsed_or_null(st, 15));
        json_object_set_new(o, "result", parsed_or_null(st, 16));
    }
    return o;
}

json_t *jobs_get_json(sqlite3 *db, const char *id, const char *tenant_id, bool full)
{
    sqlite3_stmt *st;
    if (prep(db, "SELECT " JOB_COLS " FROM jobs WHERE id = ? AND (?2 IS NULL OR tenant_id = ?2)", &st) != 0) return NULL;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    bind_text_or_null(st, 2, tenant_id);
    json_t *o = db_step(st) == SQLITE_ROW ? row_json(st, full) : NULL;
    db_release(st);
    return o;
}

json_t *jobs_list_json(sqlite3 *db, const job_filter *f)
{
    sqlite3_stmt *st;
    if (prep(db,
             "SELECT " JOB_COLS " FROM jobs WHERE (?1 IS NULL OR tenant_id = ?1) AND (?2 IS NULL OR type = ?2) AND "
             "(?3 IS NULL OR state = ?3) AND (?4 = 0 OR seq < ?4) ORDER BY seq DESC LIMIT ?5",
             &st) != 0)
        return NULL;
    bind_text_or_null(st, 1, f->tenant_id);
    bind_text_or_null(st, 2, f->type);
    bind_text_or_null(st, 3, f->state);
    sqlite3_bind_int64(st, 4, f->cursor);
    sqlite3_bind_int(st, 5, f->limit + 1);
    json_t *jobs = json_array();
    int64_t last = 0;
    bool more = false;
    while (db_step(st) == SQLITE_ROW) {
        if ((int)json_array_size(jobs) == f->limit) {
            more = true;
            break;
        }
        last = sqlite3_column_int64(st, 0);
        json_array_append_new(jobs, row_json(st, false));
    }
    db_release(st);
    char cursor[32];
    snprintf(cursor, sizeof(cursor), "%lld", (long long)last);
    return json_pack("{s:o, s:o}", "jobs", jobs, "next_cursor", more ? json_string(cursor) : json_null());
}

json_t *jobs_events_json(sqlite3 *db, const char *job_id)
{
    sqlite3_stmt *st;
    if (prep(db, "SELECT id, ts, state, reason, source, progress FROM job_events WHERE job_id = ? ORDER BY seq", &st) != 0)
        return NULL;
    sqlite3_bind_text(st, 1, job_id, -1, SQLITE_STATIC);
    json_t *events = json_array();
    while (db_step(st) == SQLITE_ROW) {
        json_t *e = json_object();
        json_object_set_new(e, "id", text_or_null(st, 0));
        json_object_set_new(e, "job_id", json_string(job_id));
        json_object_set_new(e, "ts", time_or_null(st, 1));
        json_object_set_new(e, "state", sqlite3_column_bytes(st, 2) ? text_or_null(st, 2) : json_null()); /* progress only */
        json_object_set_new(e, "reason", text_or_null(st, 3));
        json_object_set_new(e, "source", text_or_null(st, 4));
        json_object_set_new(e, "progress",
                            sqlite3_column_type(st, 5) == SQLITE_NULL ? json_null() : json_real(sqlite3_column_double(st, 5)));
        json_array_append_new(events, e);
    }
    db_release(st);
    return json_pack("{s:o}", "events", events);
}

json_t *jobs_metrics_json(sqlite3 *db, const char *job_id, int rank, int max_points)
{
    sqlite3_stmt *st;
    if (prep(db, "SELECT COUNT(*) FROM job_metrics WHERE job_id = ? AND rank = ?", &st) != 0) return NULL;
    sqlite3_bind_text(st, 1, job_id, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 2, rank);
    int64_t count = db_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
    db_release(st);
    /* thinned evenly to at most max_points, the last point always kept */
    int64_t stride = max_points > 0 && count > max_points ? (count + max_points - 1) / max_points : 1;
    if (prep(db, "SELECT ts, data FROM job_metrics WHERE job_id = ? AND rank = ? ORDER BY seq", &st) != 0) return NULL;
    sqlite3_bind_text(st, 1, job_id, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 2, rank);
    json_t *points = json_array();
    for (int64_t i = 0; db_step(st) == SQLITE_ROW; i++) {
        if (i % stride != 0 && i != count - 1) continue;
        json_t *p = json_loads((const char *)sqlite3_column_text(st, 1), 0, NULL);
        if (!json_is_object(p)) {
            json_decref(p);
            continue;
        }
        json_object_set_new(p, "ts", json_integer(sqlite3_column_int64(st, 0)));
        json_array_append_new(points, p);
    }
    db_release(st);
    /* the ranks that wrote points, so a reader knows which to ask for */
    json_t *ranks = json_array();
    if (prep(db, "SELECT DISTINCT rank FROM job_metrics WHERE job_id = ? ORDER BY rank", &st) != 0) {
        json_decref(points);
        json_decref(ranks);
        return NULL;
    }
    sqlite3_bind_text(st, 1, job_id, -1, SQLITE_STATIC);
    while (db_step(st) == SQLITE_ROW)
        json_array_append_new(ranks, json_integer(sqlite3_column_int64(st, 0)));
    db_release(st);
    return json_pack("{s:s, s:i, s:o, s:o}", "job_id", job_id, "rank", rank, "ranks", ranks, "points", points);
}

/* ---- writing from events ---- */

static int job_state_of(sqlite3 *db, const char *id, job_state *state, char *tenant)
{
    sqlite3_stmt *st;
    if (prep(db, "SELECT state, tenant_id FROM jobs WHERE id = ?", &st) != 0) return -1;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    int rc = 1;
    if (db_step(st) == SQLITE_ROW) {
        *state = job_state_parse((const char *)sqlite3_column_text(st, 0));
        snprintf(tenant, 48, "%s", (const char *)sqlite3_column_text(st, 1));
        rc = 0;
    }
    db_release(st);
    return rc;
}

static int move_job(sqlite3 *db, const event_msg *e, job_state to)
{
    sqlite3_stmt *st;
    char *result = e->result ? json_dumps(e->result, JSON_COMPACT) : NULL;
    if (prep(db,
             "UPDATE jobs SET state = ?2, updated_at = ?3, "
             "started_at = CASE WHEN ?2 = 'running' AND started_at IS NULL THEN ?3 ELSE started_at END, "
             "finished_at = CASE WHEN ?4 THEN ?3 ELSE finished_at END, "
             "worker = COALESCE(?5, worker), result = COALESCE(?6, result), "
             "error = CASE WHEN ?2 = 'failed' OR ?2 = 'cancelled' THEN ?7 ELSE error END, "
             "attempts = attempts + (?2 = 'scheduled'), "
             "progress = CASE WHEN ?2 = 'succeeded' THEN 1.0 WHEN ?2 = 'queued' THEN NULL ELSE progress END "
             "WHERE id = ?1",
             &st) != 0) {
        free(result);
        return -1;
    }
    sqlite3_bind_text(st, 1, e->job_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, job_state_name(to), -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, e->ts);
    sqlite3_bind_int(st, 4, job_state_terminal(to));
    bind_text_or_null(st, 5, e->worker);
    bind_text_or_null(st, 6, result);
    sqlite3_bind_text(st, 7, e->reason, -1, SQLITE_STATIC);
    int rc = db_step(st) == SQLITE_DONE ? 0 : -1;
    db_release(st);
    free(result);
    /* a job that ends cancelled or failed stops everywhere: its Redis cancel key is owed from this commit on
     * (migrations/0011_cancel_outbox.sql: the bus sets it and then deletes the row; a crash between leaves it) */
    if (rc == 0 && (to == JS_CANCELLED || to == JS_FAILED)) {
        if (prep(db, "INSERT OR REPLACE INTO cancel_outbox (job_id, created_at) VALUES (?, ?)", &st) != 0) return -1;
        sqlite3_bind_text(st, 1, e->job_id, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, clock_now_ms());
        rc = db_step(st) == SQLITE_DONE ? 0 : -1;
        db_release(st);
    }
    return rc;
}

static int set_progress(sqlite3 *db, const event_msg *e)
{
    sqlite3_stmt *st;
    if (prep(db, "UPDATE jobs SET progress = ?, updated_at = ? WHERE id = ?", &st) != 0) return -1;
    sqlite3_bind_double(st, 1, e->progress);
    sqlite3_bind_int64(st, 2, e->ts);
    sqlite3_bind_text(st, 3, e->job_id, -1, SQLITE_STATIC);
    int rc = db_step(st) == SQLITE_DONE ? 0 : -1;
    db_release(st);
    return rc;
}

int jobs_add_metrics(sqlite3 *db, const char *job_id, const char *event_id, int64_t ts, const json_t *metrics)
{
    char *data = json_dumps(metrics, JSON_COMPACT);
    sqlite3_stmt *st;
    if (!data || prep(db, "INSERT OR IGNORE INTO job_metrics (job_id, event_id, ts, data, rank) VALUES (?,?,?,?,?)", &st) != 0) {
        free(data);
        return -1;
    }
    /* a program rank's point says its rank (workers/exec_program.c sets it); every other point is rank 0's */
    json_t *r = json_object_get(metrics, "rank");
    json_int_t rank =
        json_is_integer(r) && json_integer_value(r) >= 0 && json_integer_value(r) <= METRICS_RANK_MAX ? json_integer_value(r) : 0;
    sqlite3_bind_int64(st, 5, rank);
    sqlite3_bind_text(st, 1, job_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, event_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, ts);
    sqlite3_bind_text(st, 4, data, -1, SQLITE_STATIC);
    int rc = db_step(st) == SQLITE_DONE ? 0 : -1;
    db_release(st);
    free(data);
    return rc;
}

json_t *jobs_serving(sqlite3 *db, const char *tenant_id, const char *model)
{
    sqlite3_stmt *st;
    if (prep(db,
             "SELECT id, state, spec, type FROM jobs WHERE tenant_id = ? AND state IN ('queued', 'scheduled', 'running') "
             "AND ? IN (json_extract(spec, '$.model'), json_extract(spec, '$.resolved.name')) ORDER BY (state = 'running') DESC, "
             "seq DESC",
             &st) != 0)
        return NULL;
    sqlite3_bind_text(st, 1, tenant_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, model, -1, SQLITE_STATIC);
    json_t *o = NULL;
    while (!o && db_step(st) == SQLITE_ROW) { /* the first of a serving type (common/jobtypes.h: inference) */
        if (!(job_type_traits((const char *)sqlite3_column_text(st, 3)) & JT_SERVING)) continue;
        json_t *spec = json_loads((const char *)sqlite3_column_text(st, 2), 0, NULL);
        o = json_pack("{s:s, s:s, s:o}", "id", (const char *)sqlite3_column_text(st, 0), "state",
                      (const char *)sqlite3_column_text(st, 1), "spec", spec ? spec : json_object());
    }
    db_release(st);
    return o;
}

bool jobs_replica_loaded(sqlite3 *db, const char *job_id)
{
    sqlite3_stmt *st;
    if (prep(db, "SELECT 1 FROM job_events WHERE job_id = ? AND reason LIKE 'replica ready%' LIMIT 1", &st) != 0) return false;
    sqlite3_bind_text(st, 1, job_id, -1, SQLITE_STATIC);
    bool yes = db_step(st) == SQLITE_ROW;
    db_release(st);
    return yes;
}

int jobs_apply_event(sqlite3 *db, const event_msg *e, apply_result *res, char *tenant_out)
{
    job_state cur = JS_INVALID;
    int found = job_state_of(db, e->job_id, &cur, tenant_out);
    if (found < 0) return -1;
    if (found > 0) {
        *res = APPLY_UNKNOWN_JOB;
        return 0;
    }
    if (job_state_terminal(cur) && job_state_terminal(job_state_parse(e->state))) {
        *res = APPLY_DUPLICATE; /* a second run's result (after a requeue race): the first one stands */
        return 0;
    }
    int ins = insert_event(db, e->id, e->job_id, e->ts, e->state, e->reason, e->source, e->progress);
    if (ins < 0) return -1;
    if (ins == 0) {
        *res = APPLY_DUPLICATE;
        return 0;
    }
    *res = APPLY_RECORDED;
    if (e->metrics && !job_state_terminal(cur) && jobs_add_metrics(db, e->job_id, e->id, e->ts, e->metrics) != 0) return -1;
    job_state to = job_state_parse(e->state);
    if (e->state[0] && job_state_can_move(cur, to)) {
        if (move_job(db, e, to) != 0) return -1;
        *res = APPLY_MOVED;
    }
    if (!e->state[0] && e->progress >= 0 && !job_state_terminal(cur) && set_progress(db, e) != 0) return -1;
    return 0;
}

int jobs_note(sqlite3 *db, const char *job_id, const char *source, const char *reason)
{
    event_msg e;
    msg_event_init(&e, job_id, source);
    return insert_event(db, e.id, job_id, e.ts, NULL, reason, e.source, -1) < 0 ? -1 : 0;
}

/* moves a live job to cancelled with reason; 0, 1 when terminal, -1 on error */
static int cancel_with(sqlite3 *db, const char *id, job_state cur, const char *reason, char *event_id_out)
{
    if (job_state_terminal(cur)) return 1;
    event_msg e;
    msg_event_init(&e, id, "server");
    snprintf(e.state, sizeof(e.state), "cancelled");
    snprintf(e.reason, sizeof(e.reason), "%s", reason);
    if (event_id_out) snprintf(event_id_out, 48, "%s", e.id);
    if (insert_event(db, e.id, id, e.ts, e.state, e.reason, e.source, -1) != 1) return -1;
    return move_job(db, &e, JS_CANCELLED);
}

int jobs_cancel(sqlite3 *db, const char *id, const char *tenant_id, const char *who, char *event_id_out)
{
    job_state cur;
    char tenant[48];
    int found = job_state_of(db, id, &cur, tenant);
    if (found != 0 || (tenant_id && strcmp(tenant, tenant_id) != 0)) return found < 0 ? -1 : 2;
    char reason[300];
    snprintf(reason, sizeof(reason), "cancelled by %s", who);
    return cancel_with(db, id, cur, reason, event_id_out);
}

int jobs_stop(sqlite3 *db, const char *id, const char *reason)
{
    job_state cur;
    char tenant[48];
    int found = job_state_of(db, id, &cur, tenant);
    if (found != 0) return found < 0 ? -1 : 1;
    return cancel_with(db, id, cur, reason, NULL);
}

json_t *jobs_row(sqlite3 *db, const char *id)
{
    sqlite3_stmt *st;
    if (prep(db, "SELECT id, tenant_id, name, priority, preemptible, state, spec, result FROM jobs WHERE id = ?", &st) != 0)
        return NULL;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    json_t *o = NULL;
    if (db_step(st) == SQLITE_ROW) {
        o = json_object();
        json_object_set_new(o, "id", text_or_null(st, 0));
        json_object_set_new(o, "tenant", text_or_null(st, 1));
        json_object_set_new(o, "name", text_or_null(st, 2));
        json_object_set_new(o, "priority", json_integer(sqlite3_column_int(st, 3)));
        json_object_set_new(o, "preemptible", json_boolean(sqlite3_column_int(st, 4)));
        json_object_set_new(o, "state", text_or_null(st, 5));
        json_object_set_new(o, "spec", parsed_or_null(st, 6));
        json_object_set_new(o, "result", parsed_or_null(st, 7));
    }
    db_release(st);
    return o;
}

int jobs_mark_all_unpublished(sqlite3 *db)
{
    sqlite3_stmt *st;
    if (prep(db, "UPDATE jobs SET published = 0 WHERE state NOT IN ('succeeded', 'failed', 'cancelled')", &st) != 0) return -1;
    int rc = db_step(st) == SQLITE_DONE ? 0 : -1;
    db_release(st);
    return rc;
}

int jobs_cancel_key_set(sqlite3 *db, const char *id)
{
    sqlite3_stmt *st;
    if (prep(db, "DELETE FROM cancel_outbox WHERE job_id = ?", &st) != 0) return -1;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    int rc = db_step(st) == SQLITE_DONE ? 0 : -1;
    db_release(st);
    return rc;
}

int jobs_each_cancel_unset(sqlite3 *db, int64_t before_ms, int max, void (*fn)(void *arg, const char *job_id), void *arg)
{
    sqlite3_stmt *st;
    if (prep(db, "SELECT job_id FROM cancel_outbox WHERE created_at < ? ORDER BY created_at, rowid LIMIT ?", &st) != 0) return -1;
    sqlite3_bind_int64(st, 1, before_ms);
    sqlite3_bind_int(st, 2, max);
    int n = 0, rc;
    while ((rc = db_step(st)) == SQLITE_ROW) {
        fn(arg, (const char *)sqlite3_column_text(st, 0));
        n++;
    }
    db_release(st);
    return rc == SQLITE_DONE ? n : -1;
}

int jobs_mark_published(sqlite3 *db, const char *id)
{
    sqlite3_stmt *st;
    if (prep(db, "UPDATE jobs SET published = 1 WHERE id = ?", &st) != 0) return -1;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    int rc = db_step(st) == SQLITE_DONE ? 0 : -1;
    db_release(st);
    return rc;
}

#define TASK_COLS                                                                                                                  \
    "seq, id, tenant_id, type, priority, slots, attempts, spec, preemptible, (SELECT coalesce(max_runtime_s, 0) "                  \
    "FROM tenants t WHERE t.id = jobs.tenant_id), (SELECT coalesce(max_memory_bytes, 0) FROM tenants t WHERE t.id = "              \
    "jobs.tenant_id), (SELECT roots FROM tenants t WHERE t.id = jobs.tenant_id) "

/* one row of TASK_COLS to fn as a task */
static void row_task(sqlite3_stmt *st, jobs_task_fn fn, void *arg)
{
    task_msg t;
    memset(&t, 0, sizeof(t));
    snprintf(t.job_id, sizeof(t.job_id), "%s", (const char *)sqlite3_column_text(st, 1));
    snprintf(t.tenant, sizeof(t.tenant), "%s", (const char *)sqlite3_column_text(st, 2));
    snprintf(t.type, sizeof(t.type), "%s", (const char *)sqlite3_column_text(st, 3));
    t.priority = sqlite3_column_int(st, 4);
    t.slots = sqlite3_column_int(st, 5);
    t.attempt = sqlite3_column_int(st, 6);
    t.spec = json_loads((const char *)sqlite3_column_text(st, 7), 0, NULL);
    t.preemptible = sqlite3_column_int(st, 8);
    t.max_runtime_s = sqlite3_column_int64(st, 9); /* the tenant's limits now (server/limits.h); 0: none */
    t.max_memory_bytes = sqlite3_column_int64(st, 10);
    const char *roots = (const char *)sqlite3_column_text(st, 11); /* and its roots (wire/msg.h) */
    t.roots = roots ? json_loads(roots, 0, NULL) : NULL;
    fn(arg, &t);
    json_decref(t.roots);
    json_decref(t.spec);
}

int64_t jobs_each_unpublished(sqlite3 *db, int64_t after, int64_t before_ms, int max, jobs_task_fn fn, void *arg)
{
    sqlite3_stmt *st;
    /* a search (server/search.h) runs in the server: never published */
    if (prep(db,
             "SELECT " TASK_COLS "FROM jobs WHERE published = 0 AND seq > ? AND created_at < ? AND state NOT IN ('succeeded', "
             "'failed', 'cancelled') AND NOT EXISTS (SELECT 1 FROM searches s WHERE s.job_id = jobs.id) ORDER BY seq LIMIT ?",
             &st) != 0)
        return after;
    sqlite3_bind_int64(st, 1, after);
    sqlite3_bind_int64(st, 2, before_ms);
    sqlite3_bind_int(st, 3, max);
    while (db_step(st) == SQLITE_ROW) {
        after = sqlite3_column_int64(st, 0);
        row_task(st, fn, arg);
    }
    db_release(st);
    return after;
}

int jobs_task_of(sqlite3 *db, const char *id, jobs_task_fn fn, void *arg)
{
    sqlite3_stmt *st;
    if (prep(db,
             "SELECT " TASK_COLS "FROM jobs WHERE id = ? AND state NOT IN ('succeeded', 'failed', 'cancelled') AND NOT EXISTS "
             "(SELECT 1 FROM searches s WHERE s.job_id = jobs.id)",
             &st) != 0)
        return -1;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    int rc = 1;
    if (db_step(st) == SQLITE_ROW) {
        row_task(st, fn, arg);
        rc = 0;
    }
    db_release(st);
    return rc;
}

void jobs_count_by_state(sqlite3 *db, void (*fn)(void *arg, const char *type, const char *state, long n), void *arg)
{
    sqlite3_stmt *st;
    if (prep(db, "SELECT type, state, count(*) FROM jobs GROUP BY type, state", &st) != 0) return;
    while (db_step(st) == SQLITE_ROW)
        fn(arg, (const char *)sqlite3_column_text(st, 0), (const char *)sqlite3_column_text(st, 1),
           (long)sqlite3_column_int64(st, 2));
    db_release(st);
}

int jobs_model_source(sqlite3 *db, const char *job_id, char *tenant, size_t tlen, char *name, size_t nlen)
{
    tenant[0] = name[0] = '\0';
    sqlite3_stmt *st = db_stmt(db, "SELECT tenant_id, coalesce(json_extract(spec, '$.model_name'), name), type FROM jobs "
                                   "WHERE id = ? AND json_type(spec, '$.trial') IS NULL");
    if (!st) return -1;
    sqlite3_bind_text(st, 1, job_id, -1, SQLITE_STATIC);
    if (db_step(st) == SQLITE_ROW && (job_type_traits((const char *)sqlite3_column_text(st, 2)) & JT_REGISTERS_MODEL)) {
        snprintf(tenant, tlen, "%s", (const char *)sqlite3_column_text(st, 0));
        snprintf(name, nlen, "%s", (const char *)sqlite3_column_text(st, 1));
    }
    db_release(st);
    return 0;
}

json_t *jobs_serving_alias(sqlite3 *db, const char *tenant_id, const char *name, const char *alias)
{
    sqlite3_stmt *st = db_stmt(db, "SELECT id, type FROM jobs WHERE tenant_id = ? AND state NOT IN ('succeeded', 'failed', "
                                   "'cancelled') AND json_extract(spec, '$.resolved.name') = ? AND "
                                   "json_extract(spec, '$.resolved.alias') = ?");
    if (!st) return NULL;
    sqlite3_bind_text(st, 1, tenant_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, alias, -1, SQLITE_STATIC);
    json_t *ids = json_array();
    int rc;
    while ((rc = db_step(st)) == SQLITE_ROW)
        if (job_type_traits((const char *)sqlite3_column_text(st, 1)) & JT_SERVING)
            json_array_append_new(ids, json_string((const char *)sqlite3_column_text(st, 0)));
    db_release(st);
    if (rc != SQLITE_DONE) {
        json_decref(ids);
        return NULL;
    }
    return ids;
}

int jobs_set_resolved(sqlite3 *db, const char *id, const json_t *resolved)
{
    char *text = json_dumps(resolved, JSON_COMPACT);
    sqlite3_stmt *st = db_stmt(db, "UPDATE jobs SET spec = json_set(spec, '$.resolved', json(?)) WHERE id = ?");
    int rc = -1;
    if (st && text) {
        sqlite3_bind_text(st, 1, text, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, id, -1, SQLITE_STATIC);
        rc = db_step(st) == SQLITE_DONE ? 0 : -1;
    }
    db_release(st);
    free(text);
    return rc;
}

bool jobs_of_tenant(sqlite3 *db, const char *job_id, const char *tenant_id)
{
    sqlite3_stmt *st = db_stmt(db, "SELECT 1 FROM jobs WHERE id = ? AND tenant_id = ?");
    if (!st) return false;
    sqlite3_bind_text(st, 1, job_id, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, tenant_id, -1, SQLITE_TRANSIENT);
    bool mine = db_step(st) == SQLITE_ROW;
    db_release(st);
    return mine;
}

int jobs_type_and_tenant(sqlite3 *db, const char *job_id, char *type, size_t type_len, char *tenant, size_t tenant_len)
{
    sqlite3_stmt *st = db_stmt(db, "SELECT type, tenant_id FROM jobs WHERE id = ?");
    if (!st) return -1;
    sqlite3_bind_text(st, 1, job_id, -1, SQLITE_TRANSIENT);
    int rc = 1;
    if (db_step(st) == SQLITE_ROW) {
        snprintf(type, type_len, "%s", (const char *)sqlite3_column_text(st, 0));
        snprintf(tenant, tenant_len, "%s", (const char *)sqlite3_column_text(st, 1));
        rc = 0;
    }
    db_release(st);
    return rc;
}

void jobs_usage_by_tenant(sqlite3 *db, void (*fn)(void *arg, const jobs_tenant_usage *u), void *arg)
{
    sqlite3_stmt *st = db_stmt(db, "SELECT t.id, t.name, "
                                   "count(CASE WHEN j.state = 'queued' THEN 1 END), "
                                   "count(CASE WHEN j.state IN ('running', 'resizing') THEN 1 END), t.weight, t.max_slots "
                                   "FROM tenants t LEFT JOIN jobs j ON j.tenant_id = t.id AND j.state IN ('queued', 'scheduled', "
                                   "'running', 'resizing') GROUP BY t.id ORDER BY t.name");
    while (st && db_step(st) == SQLITE_ROW) {
        jobs_tenant_usage u = {
            .id = (const char *)sqlite3_column_text(st, 0),
            .name = (const char *)sqlite3_column_text(st, 1),
            .queued = sqlite3_column_int64(st, 2),
            .running = sqlite3_column_int64(st, 3),
            .weight = sqlite3_column_double(st, 4),
            .max_slots = sqlite3_column_type(st, 5) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 5),
        };
        fn(arg, &u);
    }
    db_release(st);
}

void jobs_slots_by_tenant(sqlite3 *db, void (*fn)(void *arg, const char *tenant, long long used, long long max_slots), void *arg)
{
    sqlite3_stmt *st = db_stmt(db, "SELECT t.name, coalesce(sum(j.slots), 0), t.max_slots FROM tenants t LEFT JOIN jobs j "
                                   "ON j.tenant_id = t.id AND j.state IN ('scheduled', 'running', 'resizing') "
                                   "GROUP BY t.id");
    if (!st) return;
    while (db_step(st) == SQLITE_ROW)
        fn(arg, (const char *)sqlite3_column_text(st, 0), (long long)sqlite3_column_int64(st, 1),
           sqlite3_column_type(st, 2) == SQLITE_NULL ? -1 : (long long)sqlite3_column_int64(st, 2));
    db_release(st);
}

int jobs_queue_counts(sqlite3 *db, long long *queued, long long *scheduled, long long *running)
{
    sqlite3_stmt *st = db_stmt(db, "SELECT count(CASE WHEN state = 'queued' THEN 1 END), "
                                   "count(CASE WHEN state = 'scheduled' THEN 1 END), "
                                   "count(CASE WHEN state IN ('running', 'resizing') THEN 1 END) FROM jobs "
                                   "WHERE state IN ('queued', 'scheduled', 'running', 'resizing')");
    int rc = -1;
    if (st && db_step(st) == SQLITE_ROW) {
        *queued = sqlite3_column_int64(st, 0);
        *scheduled = sqlite3_column_int64(st, 1);
        *running = sqlite3_column_int64(st, 2);
        rc = 0;
    }
    db_release(st);
    return rc;
}

/* one worker's run of a job's task, copied out of the statement */
typedef struct {
    char *worker, *type, *tenant_id, *id;
    int64_t started_at, finished_at;
} run_row;

static int by_worker_then_start(const void *a, const void *b)
{
    const run_row *x = a, *y = b;
    int c = strcmp(x->worker, y->worker);
    return c ? c : x->started_at < y->started_at ? -1 : x->started_at > y->started_at;
}

static int by_start(const void *a, const void *b)
{
    const run_row *x = a, *y = b;
    return x->started_at < y->started_at ? -1 : x->started_at > y->started_at;
}

int jobs_each_interval(sqlite3 *db, int64_t from, void (*fn)(void *arg, const jobs_interval *iv), void *arg)
{
    /* Every worker that ran a task of a job (each rank of a gang, each site of a federated job,
     * each replica) says so with its own "running" event (source "worker:<id>"); its run lasts
     * until the job next leaves running (requeued, resizing, finished), or until the job's end.
     * The jobs are those finished within the window plus whatever runs now. */
    sqlite3_stmt *st = db_stmt(db, "SELECT substr(e.source, 8), e.ts, coalesce((SELECT min(x.ts) FROM job_events x "
                                   "WHERE x.job_id = j.id AND x.seq > e.seq AND x.state IN ('queued', 'resizing', "
                                   "'succeeded', 'failed', 'cancelled')), j.finished_at), j.type, j.tenant_id, j.id "
                                   "FROM jobs j JOIN job_events e ON e.job_id = j.id AND e.state = 'running' "
                                   "AND e.source LIKE 'worker:_%' "
                                   "WHERE j.finished_at >= ?1 OR j.state IN ('running', 'resizing') ORDER BY 2 LIMIT 20000");
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, from);
    run_row *rows = NULL;
    size_t n = 0, cap = 0;
    while (db_step(st) == SQLITE_ROW) {
        if (n == cap) rows = xreallocarray(rows, cap = cap ? 2 * cap : 64, sizeof(*rows));
        rows[n++] = (run_row){
            .worker = xstrdup((const char *)sqlite3_column_text(st, 0)),
            .started_at = sqlite3_column_int64(st, 1),
            .finished_at = sqlite3_column_type(st, 2) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 2),
            .type = xstrdup((const char *)sqlite3_column_text(st, 3)),
            .tenant_id = xstrdup((const char *)sqlite3_column_text(st, 4)),
            .id = xstrdup((const char *)sqlite3_column_text(st, 5)),
        };
    }
    db_release(st);
    /* a worker runs one task at a time: a run ends at the latest when the worker's next one
     * starts (a replica scaled down, a gang member whose part ended before the job did) */
    if (n) qsort(rows, n, sizeof(*rows), by_worker_then_start);
    for (size_t i = 0; i + 1 < n; i++) {
        run_row *r = &rows[i], *next = &rows[i + 1];
        if (strcmp(r->worker, next->worker) != 0) continue;
        if (r->finished_at < 0 || r->finished_at > next->started_at) r->finished_at = next->started_at;
    }
    if (n) qsort(rows, n, sizeof(*rows), by_start);
    for (size_t i = 0; i < n; i++) {
        run_row *r = &rows[i];
        if (r->finished_at < 0 || r->finished_at >= from) {
            jobs_interval iv = {r->worker, r->type, r->tenant_id, r->id, r->started_at, r->finished_at};
            fn(arg, &iv);
        }
        free(r->worker), free(r->type), free(r->tenant_id), free(r->id);
    }
    free(rows);
    return 0;
}

long long jobs_count_of_tenant(sqlite3 *db, const char *tenant_id)
{
    sqlite3_stmt *st = db_stmt(db, "SELECT count(*) FROM jobs WHERE tenant_id = ?");
    if (!st) return 0;
    sqlite3_bind_text(st, 1, tenant_id, -1, SQLITE_TRANSIENT);
    long long n = db_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
    db_release(st);
    return n;
}
