/* search.c - the search controller (search.h) and its tables (searches, trials, trial_rungs:
 * migrations/0009_search.sql): every SQL statement about a search's trials is here; the jobs
 * themselves go through jobs.h.  Each function runs inside the caller's store transaction, so a
 * decision and what it changes commit together. */
#include "server/search.h"
#include "server/db.h"
#include "server/models.h"
#include "server/spec.h"
#include "common/alloc.h"
#include "common/ids.h"
#include "common/jobstate.h"
#include "spec/search_algo.h"
#include "spec/search_spec.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RESOURCE_EPS 1e-9

void search_after_init(search_after *a)
{
    a->publish = json_array();
    a->cancel = json_array();
    a->events = json_array();
}

void search_after_clear(search_after *a)
{
    json_decref(a->publish);
    json_decref(a->cancel);
    json_decref(a->events);
    a->publish = a->cancel = a->events = NULL;
}

bool search_spec_is(const json_t *spec)
{
    return json_is_object(json_object_get(spec, "program")) && json_is_object(json_object_get(spec, "search"));
}

static void after_event(search_after *a, const char *tenant, const char *job_id, const char *state, const char *reason)
{
    json_array_append_new(a->events,
                          json_pack("{s:s, s:s, s:s?, s:s}", "tenant", tenant, "job_id", job_id, "state", state, "reason", reason));
}

/* a note on the search (an event without a state change), for the API and the live stream */
static int note(sqlite3 *db, const json_t *search, search_after *a, const char *reason)
{
    const char *id = json_string_value(json_object_get(search, "id"));
    after_event(a, json_string_value(json_object_get(search, "tenant")), id, NULL, reason);
    return jobs_note(db, id, "server", reason);
}

/* moves the search (or a trial) by an event of the server's, as a worker's would */
static int move(sqlite3 *db, const json_t *job, const char *state, const char *reason, json_t *result, search_after *a)
{
    event_msg e;
    const char *id = json_string_value(json_object_get(job, "id"));
    msg_event_init(&e, id, "server");
    snprintf(e.state, sizeof(e.state), "%s", state);
    snprintf(e.reason, sizeof(e.reason), "%s", reason);
    e.result = result;
    apply_result res;
    char tenant[48];
    int rc = jobs_apply_event(db, &e, &res, tenant);
    e.result = NULL;
    if (rc == 0 && res == APPLY_MOVED) after_event(a, tenant, id, state, reason);
    return rc;
}

/* "lr=0.0031 width=32" */
static void params_text(const json_t *params, char *out, size_t len)
{
    size_t n = 0;
    const char *k;
    json_t *v;
    out[0] = '\0';
    json_object_foreach((json_t *)params, k, v)
    {
        char *val = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(6));
        if (n < len) n += (size_t)snprintf(out + n, len - n, "%s%s=%s", n ? " " : "", k, val ? val : "?");
        free(val);
    }
}

/* ---- the tables ---- */

/* runs sql with arguments by fmt: s text, i int, d double (NAN: null) */
static int exec_bind(sqlite3 *db, const char *sql, const char *fmt, ...)
{
    sqlite3_stmt *st = db_stmt(db, sql);
    if (!st) return -1;
    va_list ap;
    va_start(ap, fmt);
    for (int i = 0; fmt[i]; i++) {
        if (fmt[i] == 's') {
            const char *s = va_arg(ap, const char *);
            sqlite3_bind_text(st, i + 1, s, -1, SQLITE_TRANSIENT);
        } else if (fmt[i] == 'i') {
            sqlite3_bind_int(st, i + 1, va_arg(ap, int));
        } else {
            double d = va_arg(ap, double);
            if (isnan(d))
                sqlite3_bind_null(st, i + 1);
            else
                sqlite3_bind_double(st, i + 1, d);
        }
    }
    va_end(ap);
    int rc = db_step(st) == SQLITE_DONE ? 0 : -1;
    db_release(st);
    return rc;
}

/* the trial whose current job is job_id: 0 (found), 1 (none), -1 */
typedef struct {
    char search_id[48];
    int idx, failures;
    char state[16];
} trial_ref;

static int trial_of_job(sqlite3 *db, const char *job_id, trial_ref *t)
{
    sqlite3_stmt *st = db_stmt(db, "SELECT search_id, idx, failures, state FROM trials WHERE job_id = ?");
    if (!st) return -1;
    sqlite3_bind_text(st, 1, job_id, -1, SQLITE_STATIC);
    int rc = 1;
    if (db_step(st) == SQLITE_ROW) {
        snprintf(t->search_id, sizeof t->search_id, "%s", (const char *)sqlite3_column_text(st, 0));
        t->idx = sqlite3_column_int(st, 1);
        t->failures = sqlite3_column_int(st, 2);
        snprintf(t->state, sizeof t->state, "%s", (const char *)sqlite3_column_text(st, 3));
        rc = 0;
    }
    db_release(st);
    return rc;
}

/* an integer from a one-row query with one text argument (-1 on error) */
static long long query_int(sqlite3 *db, const char *sql, const char *arg)
{
    sqlite3_stmt *st = db_stmt(db, sql);
    if (!st) return -1;
    sqlite3_bind_text(st, 1, arg, -1, SQLITE_STATIC);
    long long v = db_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
    db_release(st);
    return v;
}

/* ---- trials ---- */

/* the search's row with its settings; NULL when it is not a live search */
typedef struct {
    json_t *row; /* jobs_row */
    search_settings s;
} search_ctx;

static int load(sqlite3 *db, const char *search_id, search_ctx *c)
{
    c->row = jobs_row(db, search_id);
    if (!c->row) return -1;
    search_settings_get(json_object_get(json_object_get(c->row, "spec"), "search"), &c->s);
    return 0;
}

static const char *row_str(const json_t *row, const char *key)
{
    return json_string_value(json_object_get(row, key));
}

/* how many rungs trial idx has a decision at (with pause: the rungs it was promoted past, while it runs) */
static int rungs_decided(sqlite3 *db, const char *sid, int idx)
{
    sqlite3_stmt *st = db_stmt(db, "SELECT count(*) FROM trial_rungs WHERE search_id = ? AND idx = ?");
    if (!st) return -1;
    sqlite3_bind_text(st, 1, sid, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 2, idx);
    int n = db_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : -1;
    db_release(st);
    return n;
}

typedef enum { TRIAL_NEW, TRIAL_RETRY, TRIAL_PROMOTED } trial_start;

/* With pause, where trial idx's next run ends and from which job's checkpoint directory it resumes: the
 * rung after those it was promoted past (the budget's max after the last), and the directory of its first
 * job, which every run of the trial keeps (workers/exec_program.c; the workers' state directory is
 * shared by the hosts).  Adds budget_max, rung and checkpoint_job to spec.trial; -1 on error. */
static int pause_segment(sqlite3 *db, search_ctx *c, int idx, trial_start kind, json_t *trial, double *until)
{
    const search_settings *s = &c->s;
    const char *sid = row_str(c->row, "id");
    double rungs[SEARCH_MAX_RUNGS];
    int nr = search_rungs(s, rungs, SEARCH_MAX_RUNGS), k = kind == TRIAL_NEW ? 0 : rungs_decided(db, sid, idx);
    if (k < 0) return -1;
    *until = k < nr ? rungs[k] : s->max_r;
    json_object_set_new(trial, "max_resource", json_real(*until));
    json_object_set_new(trial, "budget_max", json_real(s->max_r));
    json_object_set_new(trial, "rung", json_integer(k));
    if (kind == TRIAL_NEW) return 0;
    sqlite3_stmt *st = db_stmt(db, "SELECT json_extract(jobs, '$[0]') FROM trials WHERE search_id = ? AND idx = ?");
    if (!st) return -1;
    sqlite3_bind_text(st, 1, sid, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 2, idx);
    int rc = -1;
    if (db_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) == SQLITE_TEXT) {
        json_object_set_new(trial, "checkpoint_job", json_string((const char *)sqlite3_column_text(st, 0)));
        rc = 0;
    }
    db_release(st);
    return rc;
}

/* starts trial idx as a new job: its first run, a retry after a failure or (pause) a promotion; the
 * trial's row is inserted (new) or updated */
static int start_trial(sqlite3 *db, search_ctx *c, int idx, trial_start kind, search_after *a)
{
    const search_settings *s = &c->s;
    json_t *params = search_trial_params(s, idx);
    json_t *spec = json_deep_copy(json_object_get(c->row, "spec"));
    json_object_del(spec, "search");
    json_t *trial = json_pack("{s:s, s:i, s:O, s:s, s:s}", "search", row_str(c->row, "id"), "index", idx, "params", params,
                              "metric", s->metric, "resource", s->resource);
    if (s->has_budget) json_object_set_new(trial, "max_resource", json_real(s->max_r));
    double until = s->max_r;
    json_object_set_new(spec, "trial", trial);
    job_new j;
    memset(&j, 0, sizeof j);
    int rc = s->pause ? pause_segment(db, c, idx, kind, trial, &until) : 0;
    if (rc == 0) rc = id_sequential("j", j.id, sizeof j.id);
    snprintf(j.tenant_id, sizeof j.tenant_id, "%s", row_str(c->row, "tenant"));
    snprintf(j.type, sizeof j.type, "training");
    snprintf(j.name, sizeof j.name, "%.180s trial %d", row_str(c->row, "name"), idx);
    j.priority = (int)json_integer_value(json_object_get(c->row, "priority"));
    j.preemptible = json_is_true(json_object_get(c->row, "preemptible"));
    j.spec = spec;
    j.slots = spec_module("training")->slots(spec);
    j.no_queued_quota = true;
    char *ptext = json_dumps(params, JSON_COMPACT);
    if (rc == 0) rc = jobs_insert(db, &j);
    if (rc == 0 && kind == TRIAL_NEW)
        rc = exec_bind(db, "INSERT INTO trials (search_id, idx, job_id, jobs, params) VALUES (?, ?, ?, json_array(?3), ?)", "siss",
                       row_str(c->row, "id"), idx, j.id, ptext ? ptext : "{}");
    else if (rc == 0)
        rc = exec_bind(db,
                       "UPDATE trials SET job_id = ?3, jobs = json_insert(jobs, '$[#]', ?3), state = 'running' "
                       "WHERE search_id = ?1 AND idx = ?2",
                       "sis", row_str(c->row, "id"), idx, j.id);
    if (rc == 0) {
        json_array_append_new(a->publish, json_string(j.id));
        char ptxt[600], why[900], to[120] = "";
        params_text(params, ptxt, sizeof ptxt);
        if (s->pause) snprintf(to, sizeof to, " to %s %g", s->resource, until);
        if (kind == TRIAL_PROMOTED)
            snprintf(why, sizeof why, "trial %d resumes from its checkpoint as job %s, promoted%s", idx, j.id, to);
        else
            snprintf(why, sizeof why, "trial %d %s as job %s%s: %s", idx, kind == TRIAL_RETRY ? "runs again" : "started", j.id, to,
                     ptxt);
        rc = note(db, c->row, a, why);
    }
    free(ptext);
    json_decref(spec);
    json_decref(params);
    return rc;
}

/* The statement (to step once, then db_release) whose row is the search's best trial by its last reported
 * metric, ties to the lower index: idx, job_id, params, last_value, last_resource, state; no row when no
 * trial reported.  finished_only: among the trials that succeeded. */
static sqlite3_stmt *best_trial(sqlite3 *db, const char *sid, int maximize, int finished_only)
{
    sqlite3_stmt *st = db_stmt(db, "SELECT idx, job_id, params, last_value, last_resource, state FROM trials WHERE search_id = ?1 "
                                   "AND last_value IS NOT NULL AND (?2 = 0 OR state = 'succeeded') "
                                   "ORDER BY CASE WHEN ?3 THEN -last_value ELSE last_value END, idx LIMIT 1");
    if (!st) return NULL;
    sqlite3_bind_text(st, 1, sid, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 2, finished_only);
    sqlite3_bind_int(st, 3, maximize);
    return st;
}

/* A search with register_model, at its success: the output of its best trial that finished (state
 * succeeded: its worker checked the file and described it in result.model, as for any program job)
 * becomes the next version of the search's model_name (else its name), through the registry's own
 * path (models_register_as: the version's job, metrics, file hash are the trial's).  A stopped, failed
 * or cancelled trial wrote no model (its run was cut short), so the best by the last metric may not be
 * the one registered; with no trial that finished nothing is registered, which the result and a note
 * say (the search still succeeds).  Adds "registered" ({"model", "version", "trial", "job_id"}, or null
 * with "unregistered": why) to result.  best_idx: the search's best trial. */
static int register_best(sqlite3 *db, search_ctx *c, int best_idx, json_t *result, search_after *a)
{
    if (!json_is_object(json_object_get(json_object_get(c->row, "spec"), "register_model"))) return 0;
    const char *sid = row_str(c->row, "id");
    const search_settings *s = &c->s;
    sqlite3_stmt *st = best_trial(db, sid, s->maximize, 1);
    if (!st) return -1;
    int idx = -1;
    double value = 0;
    char job_id[48] = "";
    if (db_step(st) == SQLITE_ROW) {
        idx = sqlite3_column_int(st, 0);
        snprintf(job_id, sizeof job_id, "%s", (const char *)sqlite3_column_text(st, 1));
        value = sqlite3_column_double(st, 3);
    }
    db_release(st);
    char why[900], name[256] = "";
    int version = 0;
    if (idx < 0) {
        snprintf(why, sizeof why,
                 "nothing registered: no trial finished with %s (a stopped, failed or cancelled trial writes no model)", s->metric);
    } else {
        json_t *row = jobs_row(db, job_id);
        if (!row) return -1;
        int rc = models_register_as(db, job_id, sid, json_object_get(row, "result"), name, sizeof name, &version);
        json_decref(row);
        if (rc != 0) return -1;
        if (version > 0) {
            int n = snprintf(why, sizeof why, "registered trial %d's model (job %s, %s %.6g) as %.256s version %d", idx, job_id,
                             s->metric, value, name, version);
            if (best_idx != idx && n > 0 && (size_t)n < sizeof why)
                snprintf(why + n, sizeof why - (size_t)n, "; trial %d, the best by its last %s, did not finish: it wrote no model",
                         best_idx, s->metric);
        } else {
            snprintf(why, sizeof why, "nothing registered: trial %d's job %s has no model in its result", idx, job_id);
        }
    }
    if (version > 0)
        json_object_set_new(result, "registered",
                            json_pack("{s:s, s:i, s:i, s:s}", "model", name, "version", version, "trial", idx, "job_id", job_id));
    else {
        json_object_set_new(result, "registered", json_null());
        json_object_set_new(result, "unregistered", json_string(why));
    }
    return note(db, c->row, a, why);
}

/* the search's end: the best trial by its last reported metric (with pause, the trials still paused were
 * never promoted: they end stopped where they paused) */
static int finish(sqlite3 *db, search_ctx *c, search_after *a)
{
    const char *sid = row_str(c->row, "id");
    const search_settings *s = &c->s;
    if (s->pause &&
        exec_bind(db,
                  "UPDATE trials SET state = 'stopped', reason = 'paused at rung ' || (SELECT max(rung) FROM trial_rungs r "
                  "WHERE r.search_id = trials.search_id AND r.idx = trials.idx) || ', never promoted: not in its top 1/' "
                  "|| ?2 WHERE search_id = ?1 AND state = 'paused'",
                  "si", sid, s->reduction) != 0)
        return -1;
    sqlite3_stmt *st = best_trial(db, sid, s->maximize, 0);
    if (!st) return -1;
    json_t *best = NULL;
    if (db_step(st) == SQLITE_ROW) {
        json_t *params = json_loads((const char *)sqlite3_column_text(st, 2), 0, NULL);
        best = json_pack("{s:i, s:s, s:o, s:{s:f}, s:s}", "trial", sqlite3_column_int(st, 0), "job_id",
                         (const char *)sqlite3_column_text(st, 1), "params", params ? params : json_object(), "metrics", s->metric,
                         sqlite3_column_double(st, 3), "state", (const char *)sqlite3_column_text(st, 5));
        if (sqlite3_column_type(st, 4) != SQLITE_NULL)
            json_object_set_new(json_object_get(best, "metrics"), s->resource, json_real(sqlite3_column_double(st, 4)));
    }
    db_release(st);
    json_t *counts = json_object();
    st = db_stmt(db, "SELECT state, count(*) FROM trials WHERE search_id = ? GROUP BY state");
    if (!st) {
        json_decref(best);
        json_decref(counts);
        return -1;
    }
    sqlite3_bind_text(st, 1, sid, -1, SQLITE_STATIC);
    while (db_step(st) == SQLITE_ROW)
        json_object_set_new(counts, (const char *)sqlite3_column_text(st, 0), json_integer(sqlite3_column_int(st, 1)));
    db_release(st);
    char why[600];
    int rc;
    if (best) {
        char ptxt[400];
        params_text(json_object_get(best, "params"), ptxt, sizeof ptxt);
        double v = json_number_value(json_object_get(json_object_get(best, "metrics"), s->metric));
        snprintf(why, sizeof why, "search done: the best trial is %d (%s %.6g; %s)",
                 (int)json_integer_value(json_object_get(best, "trial")), s->metric, v, ptxt);
        json_t *result =
            json_pack("{s:{s:f}, s:O, s:o, s:s, s:s, s:s}", "metrics", s->metric, v, "best", best, "trials", counts, "algorithm",
                      search_algorithm_name(s->algorithm), "metric", s->metric, "mode", s->maximize ? "max" : "min");
        rc = register_best(db, c, (int)json_integer_value(json_object_get(best, "trial")), result, a);
        if (rc == 0) rc = move(db, c->row, "succeeded", why, result, a);
        json_decref(result);
        json_decref(best);
    } else {
        snprintf(why, sizeof why, "search failed: no trial reported %s", s->metric);
        json_t *result = json_pack("{s:o}", "trials", counts);
        rc = move(db, c->row, "failed", why, result, a);
        json_decref(result);
    }
    return rc;
}

/* With pause: the paper's promotion for one free slot.  From the top rung down, the first rung with a
 * promotable paused trial (search_asha_promotable) promotes it: its decision there becomes continued and
 * it runs again, to the next rung, from its checkpoint.  1 when one was promoted, 0 when none, -1. */
static int promote(sqlite3 *db, search_ctx *c, search_after *a)
{
    const search_settings *s = &c->s;
    const char *sid = row_str(c->row, "id");
    double rungs[SEARCH_MAX_RUNGS];
    int nr = search_rungs(s, rungs, SEARCH_MAX_RUNGS);
    for (int k = nr - 1; k >= 0; k--) {
        sqlite3_stmt *st = db_stmt(db, "SELECT r.idx, r.value, r.continued OR t.state != 'paused' FROM trial_rungs r JOIN trials t "
                                       "ON t.search_id = r.search_id AND t.idx = r.idx WHERE r.search_id = ? AND r.rung = ?");
        if (!st) return -1;
        sqlite3_bind_text(st, 1, sid, -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 2, k);
        asha_record *recs = NULL;
        int n = 0, cap = 0;
        while (db_step(st) == SQLITE_ROW) {
            if (n == cap) recs = xreallocarray(recs, (size_t)(cap = cap ? 2 * cap : 16), sizeof(asha_record));
            recs[n++] = (asha_record){sqlite3_column_int(st, 0), sqlite3_column_double(st, 1), sqlite3_column_int(st, 2) != 0};
        }
        db_release(st);
        int i = n > 0 ? search_asha_promotable(recs, n, s->maximize, s->reduction) : -1;
        asha_record r = i >= 0 && recs ? recs[i] : (asha_record){0};
        free(recs);
        if (i < 0) continue;
        char why[600];
        snprintf(why, sizeof why, "trial %d promoted past rung %d (%s %g): %s %.6g within the top %d of %d", r.trial, k,
                 s->resource, rungs[k], s->metric, r.value, n / s->reduction, n);
        if (exec_bind(db, "UPDATE trial_rungs SET continued = 1 WHERE search_id = ? AND rung = ? AND idx = ?", "sii", sid, k,
                      r.trial) != 0 ||
            note(db, c->row, a, why) != 0 || start_trial(db, c, r.trial, TRIAL_PROMOTED, a) != 0)
            return -1;
        return 1;
    }
    return 0;
}

/* starts what may start (with pause, a promotion before a new trial, for each free slot); ends the
 * search when nothing runs and nothing is left to start */
static int fill(sqlite3 *db, search_ctx *c, search_after *a)
{
    const char *sid = row_str(c->row, "id");
    long long started = query_int(db, "SELECT started FROM searches WHERE job_id = ?", sid);
    long long live = query_int(db, "SELECT count(*) FROM trials WHERE search_id = ? AND state = 'running'", sid);
    if (started < 0 || live < 0) return -1;
    int fresh = 0, promoted = 0;
    for (int room = c->s.parallel - (int)live; room > 0; room--) {
        int p = c->s.pause ? promote(db, c, a) : 0;
        if (p < 0) return -1;
        if (p > 0) {
            promoted++;
            continue;
        }
        if (search_to_start(&c->s, (int)started + fresh, (int)live + promoted + fresh) == 0) break;
        if (start_trial(db, c, (int)started + fresh, TRIAL_NEW, a) != 0) return -1;
        fresh++;
    }
    if (fresh && exec_bind(db, "UPDATE searches SET started = started + ?2 WHERE job_id = ?1", "si", sid, fresh) != 0) return -1;
    if (live + fresh + promoted == 0) return finish(db, c, a);
    return 0;
}

int search_begin(sqlite3 *db, const char *job_id, search_after *a)
{
    search_ctx c;
    if (load(db, job_id, &c) != 0) return -1;
    int rc = exec_bind(db, "INSERT INTO searches (job_id) VALUES (?)", "s", job_id);
    if (rc == 0) rc = jobs_mark_published(db, job_id); /* never: the outbox leaves it alone */
    double rungs[SEARCH_MAX_RUNGS];
    int nr = search_rungs(&c.s, rungs, SEARCH_MAX_RUNGS);
    char why[700], rtxt[300] = "";
    size_t n = 0;
    for (int i = 0; i < nr && n < sizeof rtxt; i++)
        n += (size_t)snprintf(rtxt + n, sizeof rtxt - n, "%s%g", i ? ", " : "", rungs[i]);
    if (nr)
        snprintf(why, sizeof why, "search: %s over %d parameters, %d trials, %d at a time; rungs at %s %s (max %g)",
                 search_algorithm_name(c.s.algorithm), c.s.nparams, c.s.max_trials, c.s.parallel, c.s.resource, rtxt, c.s.max_r);
    else
        snprintf(why, sizeof why, "search: %s over %d parameters, %d trials, %d at a time", search_algorithm_name(c.s.algorithm),
                 c.s.nparams, c.s.max_trials, c.s.parallel);
    if (rc == 0) rc = move(db, c.row, "running", why, NULL, a);
    if (rc == 0) rc = fill(db, &c, a);
    json_decref(c.row);
    return rc;
}

/* asha at the rungs point crossed: 1 when the trial was stopped */
static int asha(sqlite3 *db, search_ctx *c, const trial_ref *t, const char *job_id, double value, double resource, search_after *a)
{
    const search_settings *s = &c->s;
    const char *sid = row_str(c->row, "id");
    double rungs[SEARCH_MAX_RUNGS];
    int nr = search_rungs(s, rungs, SEARCH_MAX_RUNGS);
    for (int k = 0; k < nr; k++) {
        if (resource < rungs[k] - RESOURCE_EPS) break;
        sqlite3_stmt *st = db_stmt(db, "SELECT idx, value FROM trial_rungs WHERE search_id = ? AND rung = ?");
        if (!st) return -1;
        sqlite3_bind_text(st, 1, sid, -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 2, k);
        double *rec = NULL;
        int nrec = 0, cap = 0;
        bool mine = false;
        while (db_step(st) == SQLITE_ROW) {
            if (sqlite3_column_int(st, 0) == t->idx) mine = true;
            if (nrec == cap) rec = xreallocarray(rec, (size_t)(cap = cap ? 2 * cap : 16), sizeof(double));
            rec[nrec++] = sqlite3_column_double(st, 1);
        }
        db_release(st);
        if (mine) { /* decided at this rung already (a point seen again after a requeue) */
            free(rec);
            continue;
        }
        asha_verdict v = search_asha_rule(rec, nrec, value, s->maximize, s->reduction);
        free(rec);
        if (exec_bind(db, "INSERT INTO trial_rungs (search_id, rung, idx, resource, value, continued) VALUES (?,?,?,?,?,?)",
                      "siiddi", sid, k, t->idx, rungs[k], value, v.stop ? 0 : 1) != 0)
            return -1;
        char why[700];
        if (!v.stop) {
            snprintf(why, sizeof why, "trial %d continues past rung %d (%s %g): %s %.6g within the top %d of %d (cut %.6g)", t->idx,
                     k, s->resource, rungs[k], s->metric, value, v.keep, v.n, v.cut);
            if (note(db, c->row, a, why) != 0) return -1;
            continue;
        }
        snprintf(why, sizeof why, "trial %d stopped at rung %d (%s %g): %s %.6g below the rung's cut %.6g (top %d of %d continue)",
                 t->idx, k, s->resource, rungs[k], s->metric, value, v.cut, v.keep, v.n);
        char jwhy[800];
        snprintf(jwhy, sizeof jwhy, "stopped by its search %s (asha): %s", sid, why);
        if (jobs_stop(db, job_id, jwhy) < 0) return -1;
        json_array_append_new(a->cancel, json_string(job_id));
        after_event(a, row_str(c->row, "tenant"), job_id, "cancelled", jwhy);
        if (exec_bind(db, "UPDATE trials SET state = 'stopped', reason = ?3 WHERE search_id = ?1 AND idx = ?2", "sis", sid, t->idx,
                      why) != 0 ||
            note(db, c->row, a, why) != 0)
            return -1;
        return 1;
    }
    return 0;
}

/* the metric in a metrics object: 0 with *v finite, else -1 */
static int metric_of(const json_t *m, const char *name, double *v)
{
    json_t *x = json_object_get(m, name);
    if (!json_is_number(x) || !isfinite(json_number_value(x))) return -1;
    *v = json_number_value(x);
    return 0;
}

/* With pause, a trial's run that succeeded before the budget's max: the trial pauses at the rung its run
 * ended at, its last value recorded there (not yet promoted), or fails when it reported no value to rank it
 * by.  1 when it paused or failed here, 0 when the run was its last (it finished), -1. */
static int paused(sqlite3 *db, search_ctx *c, const trial_ref *t, search_after *a)
{
    const search_settings *s = &c->s;
    const char *sid = row_str(c->row, "id");
    double rungs[SEARCH_MAX_RUNGS];
    int nr = search_rungs(s, rungs, SEARCH_MAX_RUNGS), k = rungs_decided(db, sid, t->idx);
    if (k < 0) return -1;
    if (k >= nr) return 0;
    sqlite3_stmt *st = db_stmt(db, "SELECT last_value FROM trials WHERE search_id = ? AND idx = ? AND last_value IS NOT NULL");
    if (!st) return -1;
    sqlite3_bind_text(st, 1, sid, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 2, t->idx);
    bool has = db_step(st) == SQLITE_ROW;
    double v = has ? sqlite3_column_double(st, 0) : 0;
    db_release(st);
    char why[700];
    if (!has) {
        snprintf(why, sizeof why, "trial %d failed: its run to %s %g reported no %s to rank it by at rung %d", t->idx, s->resource,
                 rungs[k], s->metric, k);
        if (exec_bind(db, "UPDATE trials SET state = 'failed', reason = ?3 WHERE search_id = ?1 AND idx = ?2", "sis", sid, t->idx,
                      why) != 0)
            return -1;
        return note(db, c->row, a, why) == 0 ? 1 : -1;
    }
    long long n = 0;
    st = db_stmt(db, "SELECT count(*) FROM trial_rungs WHERE search_id = ? AND rung = ?");
    if (!st) return -1;
    sqlite3_bind_text(st, 1, sid, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 2, k);
    if (db_step(st) == SQLITE_ROW) n = sqlite3_column_int64(st, 0);
    db_release(st);
    snprintf(why, sizeof why, "trial %d paused at rung %d (%s %g): %s %.6g; %lld trials at this rung, the top %lld promotable",
             t->idx, k, s->resource, rungs[k], s->metric, v, n + 1, (n + 1) / s->reduction);
    if (exec_bind(db, "INSERT INTO trial_rungs (search_id, rung, idx, resource, value, continued) VALUES (?,?,?,?,?,0)", "siidd",
                  sid, k, t->idx, rungs[k], v) != 0 ||
        exec_bind(db, "UPDATE trials SET state = 'paused', reason = ?3 WHERE search_id = ?1 AND idx = ?2", "sis", sid, t->idx,
                  why) != 0)
        return -1;
    return note(db, c->row, a, why) == 0 ? 1 : -1;
}

/* a trial's job ended (moved to a terminal state by its worker) */
static int trial_ended(sqlite3 *db, search_ctx *c, const trial_ref *t, const event_msg *e, search_after *a)
{
    const search_settings *s = &c->s;
    const char *sid = row_str(c->row, "id");
    char why[900];
    job_state to = job_state_parse(e->state);
    double v, r = NAN;
    json_t *m = json_object_get(e->result, "metrics");
    if (metric_of(m, s->metric, &v) == 0) {
        if (metric_of(m, s->resource, &r) != 0) r = NAN;
        if (exec_bind(db,
                      "UPDATE trials SET last_value = ?3, last_resource = coalesce(?4, last_resource) WHERE search_id = ?1 AND "
                      "idx = ?2",
                      "sidd", sid, t->idx, v, r) != 0)
            return -1;
    }
    if (to == JS_SUCCEEDED && s->pause) {
        int rc = paused(db, c, t, a);
        if (rc < 0) return -1;
        if (rc > 0) return fill(db, c, a);
    }
    if (to == JS_SUCCEEDED) {
        snprintf(why, sizeof why, "trial %d finished", t->idx);
        if (exec_bind(db, "UPDATE trials SET state = 'succeeded', reason = 'finished' WHERE search_id = ?1 AND idx = ?2", "si", sid,
                      t->idx) != 0)
            return -1;
    } else if (to == JS_FAILED && t->failures < s->max_failures) {
        snprintf(why, sizeof why, "trial %d failed (%.300s); running it again (retry %d of %d)", t->idx, e->reason, t->failures + 1,
                 s->max_failures);
        if (exec_bind(db, "UPDATE trials SET failures = failures + 1, reason = ?3 WHERE search_id = ?1 AND idx = ?2", "sis", sid,
                      t->idx, why) != 0 ||
            note(db, c->row, a, why) != 0)
            return -1;
        return start_trial(db, c, t->idx, TRIAL_RETRY, a);
    } else {
        const char *state = to == JS_FAILED ? "failed" : "cancelled";
        snprintf(why, sizeof why, "trial %d %s: %.500s", t->idx, state, e->reason);
        if (exec_bind(db, "UPDATE trials SET state = ?3, reason = ?4 WHERE search_id = ?1 AND idx = ?2", "siss", sid, t->idx, state,
                      why) != 0)
            return -1;
    }
    if (note(db, c->row, a, why) != 0) return -1;
    return fill(db, c, a);
}

int search_on_event(sqlite3 *db, const event_msg *e, apply_result res, search_after *a)
{
    if (res != APPLY_RECORDED && res != APPLY_MOVED) return 0;
    trial_ref t;
    int found = trial_of_job(db, e->job_id, &t);
    if (found != 0) return found < 0 ? -1 : 0;
    if (strcmp(t.state, "running") != 0) return 0;
    search_ctx c;
    if (load(db, t.search_id, &c) != 0) return -1;
    int rc = 0;
    if (job_state_terminal(job_state_parse(row_str(c.row, "state")))) goto out; /* a cancelled search decides nothing */
    double v, r;
    if (e->metrics && metric_of(e->metrics, c.s.metric, &v) == 0) {
        bool has_r = metric_of(e->metrics, c.s.resource, &r) == 0;
        rc = exec_bind(db, "UPDATE trials SET last_value = ?3, last_resource = ?4 WHERE search_id = ?1 AND idx = ?2", "sidd",
                       t.search_id, t.idx, v, has_r ? r : NAN);
        if (rc == 0 && has_r && c.s.algorithm == SEARCH_ASHA && !c.s.pause) { /* with pause: decided when the run ends */
            int stopped = asha(db, &c, &t, e->job_id, v, r, a);
            if (stopped < 0) rc = -1;
            if (stopped > 0) {
                rc = fill(db, &c, a);
                goto out;
            }
        }
    }
    if (rc == 0 && res == APPLY_MOVED && job_state_terminal(job_state_parse(e->state))) rc = trial_ended(db, &c, &t, e, a);
out:
    json_decref(c.row);
    return rc;
}

int search_on_cancel(sqlite3 *db, const char *job_id, search_after *a)
{
    if (query_int(db, "SELECT count(*) FROM searches WHERE job_id = ?", job_id) > 0) {
        /* the search: every live trial stops with it */
        sqlite3_stmt *st = db_stmt(db, "SELECT idx, job_id FROM trials WHERE search_id = ? AND state = 'running'");
        if (!st) return -1;
        sqlite3_bind_text(st, 1, job_id, -1, SQLITE_STATIC);
        json_t *live = json_array();
        while (db_step(st) == SQLITE_ROW)
            json_array_append_new(
                live, json_pack("{s:i, s:s}", "idx", sqlite3_column_int(st, 0), "job", (const char *)sqlite3_column_text(st, 1)));
        db_release(st);
        size_t i;
        json_t *x;
        int rc = 0;
        char why[200];
        snprintf(why, sizeof why, "cancelled with its search %s", job_id);
        json_array_foreach(live, i, x)
        {
            const char *jid = json_string_value(json_object_get(x, "job"));
            if (rc == 0 && jobs_stop(db, jid, why) < 0) rc = -1;
            json_array_append_new(a->cancel, json_string(jid));
            if (rc == 0)
                rc = exec_bind(db, "UPDATE trials SET state = 'cancelled', reason = ?3 WHERE search_id = ?1 AND idx = ?2", "sis",
                               job_id, (int)json_integer_value(json_object_get(x, "idx")), why);
        }
        json_decref(live);
        if (rc == 0) /* with pause: the paused trials end with it (no job of theirs runs) */
            rc = exec_bind(db, "UPDATE trials SET state = 'cancelled', reason = ?2 WHERE search_id = ?1 AND state = 'paused'", "ss",
                           job_id, why);
        return rc;
    }
    trial_ref t;
    int found = trial_of_job(db, job_id, &t);
    if (found != 0) return found < 0 ? -1 : 0;
    if (strcmp(t.state, "running") != 0) return 0;
    search_ctx c;
    if (load(db, t.search_id, &c) != 0) return -1;
    int rc = exec_bind(db,
                       "UPDATE trials SET state = 'cancelled', reason = 'its job was cancelled' WHERE search_id = ?1 AND "
                       "idx = ?2",
                       "si", t.search_id, t.idx);
    char why[200];
    snprintf(why, sizeof why, "trial %d cancelled (its job %s was cancelled)", t.idx, job_id);
    if (rc == 0) rc = note(db, c.row, a, why);
    if (rc == 0 && !job_state_terminal(job_state_parse(row_str(c.row, "state")))) rc = fill(db, &c, a);
    json_decref(c.row);
    return rc;
}

/* ---- the API ---- */

static json_t *rungs_of(sqlite3 *db, const char *sid, int idx)
{
    json_t *out = json_array();
    sqlite3_stmt *st = db_stmt(db, "SELECT rung, resource, value, continued, rowid FROM trial_rungs WHERE search_id = ? AND "
                                   "idx = ? ORDER BY rung");
    if (!st) return out;
    sqlite3_bind_text(st, 1, sid, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 2, idx);
    while (db_step(st) == SQLITE_ROW)
        json_array_append_new(out, json_pack("{s:i, s:f, s:f, s:b, s:I}", "rung", sqlite3_column_int(st, 0), "resource",
                                             sqlite3_column_double(st, 1), "value", sqlite3_column_double(st, 2), "continued",
                                             sqlite3_column_int(st, 3), "order", (json_int_t)sqlite3_column_int64(st, 4)));
    db_release(st);
    return out;
}

json_t *search_trials_json(sqlite3 *db, const char *job_id)
{
    if (query_int(db, "SELECT count(*) FROM searches WHERE job_id = ?", job_id) <= 0) return NULL;
    search_ctx c;
    if (load(db, job_id, &c) != 0) return NULL;
    const search_settings *s = &c.s;
    sqlite3_stmt *st = db_stmt(db, "SELECT idx, job_id, jobs, params, state, failures, reason, last_value, last_resource "
                                   "FROM trials WHERE search_id = ? ORDER BY idx");
    json_t *trials = json_array();
    int best = -1;
    double best_v = 0;
    if (st) sqlite3_bind_text(st, 1, job_id, -1, SQLITE_STATIC);
    while (st && db_step(st) == SQLITE_ROW) {
        int idx = sqlite3_column_int(st, 0);
        json_t *jobs = json_loads((const char *)sqlite3_column_text(st, 2), 0, NULL);
        json_t *params = json_loads((const char *)sqlite3_column_text(st, 3), 0, NULL);
        json_t *t = json_pack("{s:i, s:s, s:o, s:o, s:s, s:i, s:s}", "trial", idx, "job_id",
                              (const char *)sqlite3_column_text(st, 1), "jobs", jobs ? jobs : json_array(), "params",
                              params ? params : json_object(), "state", (const char *)sqlite3_column_text(st, 4), "failures",
                              sqlite3_column_int(st, 5), "reason", (const char *)sqlite3_column_text(st, 6));
        if (sqlite3_column_type(st, 7) == SQLITE_NULL) {
            json_object_set_new(t, "last", json_null());
        } else {
            double v = sqlite3_column_double(st, 7);
            json_t *last = json_pack("{s:f}", "value", v);
            json_object_set_new(last, "resource",
                                sqlite3_column_type(st, 8) == SQLITE_NULL ? json_null() : json_real(sqlite3_column_double(st, 8)));
            json_object_set_new(t, "last", last);
            if (best < 0 || search_better(v, best_v, s->maximize)) best = idx, best_v = v;
        }
        json_object_set_new(t, "rungs", rungs_of(db, job_id, idx));
        json_array_append_new(trials, t);
    }
    db_release(st);
    double rungs[SEARCH_MAX_RUNGS];
    int nr = search_rungs(s, rungs, SEARCH_MAX_RUNGS);
    json_t *rj = json_array();
    for (int i = 0; i < nr; i++)
        json_array_append_new(rj, json_real(rungs[i]));
    json_t *out = json_pack("{s:s, s:s, s:s, s:s, s:s, s:o, s:i, s:i, s:b, s:o, s:o}", "job_id", job_id, "algorithm",
                            search_algorithm_name(s->algorithm), "metric", s->metric, "mode", s->maximize ? "max" : "min",
                            "resource", s->resource, "rungs", rj, "max_trials", s->max_trials, "parallel", s->parallel, "pause",
                            s->pause, "best", best < 0 ? json_null() : json_integer(best), "trials", trials);
    json_decref(c.row);
    return out;
}
