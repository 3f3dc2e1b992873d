/* api_jobs.c - /v1/jobs: submit (durable before 201, group commit), list with
 * keyset pagination, get, cancel, events.  A tenant sees only its own jobs;
 * another tenant's job is a 404 (never 403, which would reveal it exists).
 * Admin tokens see every tenant's jobs. */
#include "common/ids.h"
#include "common/alloc.h"
#include "common/jobstate.h"
#include "common/jobtypes.h"
#include "common/log.h"
#include "server/api.h"
#include "server/audit.h"
#include "server/bus.h"
#include "server/db.h"
#include "server/jobs.h"
#include "server/limits.h"
#include "server/tenants.h"
#include "server/models.h"
#include "server/search.h"
#include "server/spec.h"
#include "server/sse.h"

#include <stdlib.h>
#include <string.h>

#define IDEM_MAX_LEN 200

/* the tenant filter of the caller: NULL for admins */
static const char *scope(http_ctx *c)
{
    return c->auth.role == ROLE_ADMIN ? NULL : c->auth.tenant_id;
}

typedef struct {
    http_defer *defer;
    server *srv;
    job_new job;
    json_t *spec;
    char idem[IDEM_MAX_LEN + 1];
    tenant_limits limits; /* the tenant's, at submission: runtime and memory go with the task */
    json_t *roots;        /* the tenant's roots, at submission: they go with the task too */
    bool search;          /* a search (server/search.h): the server runs it, its trials are published */
    search_after after;
} submit_op;

static void submit_op_free(submit_op *op)
{
    json_decref(op->roots);
    search_after_clear(&op->after);
    free(op);
}

static int apply_submit(sqlite3 *db, void *arg)
{
    submit_op *op = arg;
    if (jobs_insert(db, &op->job) != 0) return -1;
    if (!op->search || op->job.existing[0] || op->job.over_quota) return 0;
    return search_begin(db, op->job.id, &op->after); /* never published itself: its first trials are */
}

static void submit_done(void *arg, int ok)
{
    submit_op *op = arg;
    http_ctx *c = http_defer_ctx(op->defer);
    const char *id = op->job.existing[0] ? op->job.existing : op->job.id;
    bool inserted = ok && !op->job.existing[0] && !op->job.over_quota;
    if (inserted && op->search) {
        bus_search_after(op->srv->bus, &op->after);
    } else if (inserted) {
        task_msg t = {.priority = op->job.priority,
                      .slots = op->job.slots,
                      .attempt = 0,
                      .preemptible = op->job.preemptible,
                      .roots = op->roots,
                      .spec = op->spec};
        snprintf(t.job_id, sizeof(t.job_id), "%s", op->job.id);
        snprintf(t.tenant, sizeof(t.tenant), "%s", op->job.tenant_id);
        snprintf(t.type, sizeof(t.type), "%s", op->job.type);
        limits_to_task(&op->limits, &t);
        bus_publish_job(op->srv->bus, &t);
        char ev[256];
        snprintf(ev, sizeof(ev), "{\"job_id\":\"%s\",\"state\":\"queued\",\"reason\":\"accepted\",\"source\":\"server\"}",
                 op->job.id);
        sse_publish(op->srv->sse, op->job.tenant_id, "job", ev);
    }
    if (c && ok && op->job.over_quota) {
        http_add_header(c, "retry-after", "5");
        http_error(c, GERR_RATE_LIMITED, NULL,
                   "quota: your tenant already has %d jobs waiting (max_queued); retry when some have started",
                   op->job.over_quota - 1);
    } else if (c && ok && op->job.idem_mismatch) {
        http_error(c, GERR_UNPROCESSABLE, "Idempotency-Key", "this Idempotency-Key was used for a different request (job %s)",
                   op->job.existing);
    } else if (c) {
        json_t *job = ok ? jobs_get_json(op->srv->db, id, NULL, true) : NULL;
        models_public_job(job);
        if (!job) {
            http_error(c, GERR_INTERNAL, NULL, "the job could not be stored; nothing was accepted, retry");
        } else {
            char loc[96];
            snprintf(loc, sizeof(loc), "/v1/jobs/%s", id);
            http_add_header(c, "location", loc);
            if (op->job.existing[0]) http_add_header(c, "idempotent-replayed", "true");
            http_reply_json(c, op->job.existing[0] ? 200 : 201, job);
        }
    }
    http_defer_end(op->defer);
    json_decref(op->spec);
    submit_op_free(op);
}

void api_job_submit(http_ctx *c)
{
    submit_op *op = xcalloc(1, sizeof(*op));
    char field[256] = "", msg[512] = "";
    if (spec_validate_job(c->body, &op->job, field, sizeof(field), msg, sizeof(msg)) != 0) {
        submit_op_free(op);
        http_error(c, GERR_INVALID_FIELD, field, "%s", msg);
        return;
    }
    op->roots = tenants_roots(c->srv->db, c->auth.tenant_id);
    if (spec_confine_paths(op->job.spec, op->job.type, op->roots, field, sizeof(field), msg, sizeof(msg)) != 0) {
        submit_op_free(op);
        http_error(c, GERR_INVALID_FIELD, field, "%s", msg);
        return;
    }
    tenants_limits(c->srv->db, c->auth.tenant_id, &op->limits); /* max_epochs, max_steps (server/limits.h) */
    if (limits_check_spec(&op->limits, op->job.type, op->job.spec, field, sizeof(field), msg, sizeof(msg)) != 0) {
        submit_op_free(op);
        http_error(c, GERR_INVALID_FIELD, field, "%s", msg);
        return;
    }
    const char *idem = http_header(c, "idempotency-key");
    if (idem && (strlen(idem) == 0 || strlen(idem) > IDEM_MAX_LEN)) {
        submit_op_free(op);
        http_error(c, GERR_BAD_REQUEST, "Idempotency-Key", "the Idempotency-Key header must be 1 to %d characters", IDEM_MAX_LEN);
        return;
    }
    if (id_sequential("j", op->job.id, sizeof(op->job.id)) != 0) { /* in time order: jobs.id grows at its end */
        submit_op_free(op);
        http_error(c, GERR_INTERNAL, NULL, "random generator failed");
        return;
    }
    if (idem) {
        snprintf(op->idem, sizeof(op->idem), "%s", idem);
        op->job.idem = op->idem;
        char *canon = json_dumps(c->body, JSON_COMPACT | JSON_SORT_KEYS);
        auth_hash(canon ? canon : "", canon ? strlen(canon) : 0, op->job.body_sha256);
        free(canon);
    }
    const job_spec *js = spec_module(op->job.type);
    job_model_ref ref;
    if (js->model && js->model(op->job.spec, &ref)) { /* the registered model it runs: which artifact, fixed at submission */
        json_t *resolved = NULL;
        int rc = models_resolve(c->srv->db, c->auth.tenant_id, ref.model, ref.version, &resolved);
        if (rc != 0) {
            submit_op_free(op);
            if (rc < 0)
                http_error(c, GERR_INTERNAL, NULL, "could not read the model registry");
            else if (rc == MODELS_NO_SIGNATURE)
                http_error(c, GERR_INVALID_FIELD, ref.field,
                           "model '%s': this TorchScript version has no inputs and outputs declared, so it cannot be "
                           "served; upload it with metadata, or register it with register_model.metadata",
                           ref.model);
            else if (rc == MODELS_NO_ALIAS)
                http_error(c, GERR_INVALID_FIELD, ref.field,
                           "model '%s': no such alias in your registry (PUT /v1/models/{name}/aliases/{alias} sets one)",
                           ref.model);
            else
                http_error(c, GERR_INVALID_FIELD, ref.field, "no model '%s'%s in your registry (GET /v1/models lists them)",
                           ref.model, ref.version ? " with this version" : "");
            return;
        }
        json_object_set_new(op->job.spec, JOB_SPEC_RESOLVED, resolved);
    }
    snprintf(op->job.tenant_id, sizeof(op->job.tenant_id), "%s", c->auth.tenant_id);
    op->spec = json_incref(op->job.spec);
    op->job.spec = op->spec;
    op->search = search_spec_is(op->spec);
    search_after_init(&op->after);
    op->srv = c->srv;
    op->defer = http_defer_begin(c);
    store_submit(c->srv->store, apply_submit, submit_done, op);
}

void api_job_list(http_ctx *c)
{
    job_filter f = {.tenant_id = scope(c), .limit = 50};
    f.type = http_query(c, "type");
    f.state = http_query(c, "state");
    const char *limit = http_query(c, "limit"), *cursor = http_query(c, "cursor");
    if (f.type && !job_type_valid(f.type)) {
        http_error(c, GERR_INVALID_FIELD, "type", "must be one of %s", job_type_list());
        return;
    }
    if (f.state && job_state_parse(f.state) == JS_INVALID) {
        http_error(c, GERR_INVALID_FIELD, "state",
                   "must be one of queued, scheduled, running, resizing, succeeded, failed, cancelled");
        return;
    }
    if (limit) {
        char *end;
        long n = strtol(limit, &end, 10);
        if (*end || n < 1 || n > c->srv->list_max) {
            http_error(c, GERR_INVALID_FIELD, "limit", "must be an integer from 1 to %d", c->srv->list_max);
            return;
        }
        f.limit = (int)n;
    }
    if (cursor) {
        char *end;
        long long n = strtoll(cursor, &end, 10);
        if (*end || n < 1) {
            http_error(c, GERR_INVALID_FIELD, "cursor", "not a cursor returned by this endpoint");
            return;
        }
        f.cursor = n;
    }
    json_t *out = jobs_list_json(c->srv->db, &f);
    if (!out) {
        http_error(c, GERR_INTERNAL, NULL, "database error");
        return;
    }
    http_reply_json(c, 200, out);
}

void api_job_get(http_ctx *c)
{
    json_t *job = jobs_get_json(c->srv->db, http_param(c, 0), scope(c), true);
    if (!job) {
        http_error(c, GERR_NOT_FOUND, "id", "no job with this id");
        return;
    }
    models_public_job(job);                                            /* no server paths */
    json_t *trials = search_trials_json(c->srv->db, http_param(c, 0)); /* a search: its trials */
    if (trials) json_object_set(job, "trials", json_object_get(trials, "trials"));
    json_decref(trials);
    http_reply_json(c, 200, job);
}

json_t *api_job_visible(http_ctx *c, bool full)
{
    json_t *job = jobs_get_json(c->srv->db, http_param(c, 0), scope(c), full);
    if (!job) http_error(c, GERR_NOT_FOUND, "id", "no job with this id");
    return job;
}

/* the job of the path, when the caller may see it; else a 404 is sent and NULL returned */
static const char *visible_job(http_ctx *c)
{
    json_t *job = api_job_visible(c, false);
    if (!job) return NULL;
    json_decref(job);
    return http_param(c, 0);
}

void api_job_events(http_ctx *c)
{
    const char *id = visible_job(c);
    if (id) http_reply_json(c, 200, jobs_events_json(c->srv->db, id));
}

void api_job_trials(http_ctx *c)
{
    const char *id = visible_job(c);
    if (!id) return;
    json_t *trials = search_trials_json(c->srv->db, id);
    if (!trials) {
        http_error(c, GERR_NOT_FOUND, "id", "this job is not a search (a training job with spec.search has trials)");
        return;
    }
    http_reply_json(c, 200, trials);
}

#define METRICS_MAX_POINTS 5000

void api_job_metrics(http_ctx *c)
{
    const char *id = visible_job(c);
    if (!id) return;
    /* ?rank=R: a program job's rank R (its points say "rank"); rank 0's by default, the job's curves */
    long rank = 0;
    const char *rs = http_query(c, "rank");
    if (rs) {
        char *end;
        rank = strtol(rs, &end, 10);
        if (!*rs || *end || rank < 0 || rank > METRICS_RANK_MAX) {
            http_error(c, GERR_INVALID_FIELD, "rank", "must be an integer from 0 to %d", METRICS_RANK_MAX);
            return;
        }
    }
    json_t *m = jobs_metrics_json(c->srv->db, id, (int)rank, METRICS_MAX_POINTS);
    if (!m) {
        http_error(c, GERR_INTERNAL, NULL, "could not read the job's metrics");
        return;
    }
    http_reply_json(c, 200, m);
}

typedef struct {
    http_defer *defer;
    server *srv;
    char id[64], tenant[48], who[200], event_id[48], token_id[48];
    int scoped;
    int rc;
    search_after after;
} cancel_op;

static int apply_cancel(sqlite3 *db, void *arg)
{
    cancel_op *op = arg;
    op->rc = jobs_cancel(db, op->id, op->scoped ? op->tenant : NULL, op->who, op->event_id);
    if (op->rc == 0) audit_record(db, op->token_id, "job.cancel", op->id);
    if (op->rc == 0 && search_on_cancel(db, op->id, &op->after) != 0) return -1; /* a search's trials stop with it */
    return op->rc < 0 ? -1 : 0;
}

static void cancel_done(void *arg, int ok)
{
    cancel_op *op = arg;
    http_ctx *c = http_defer_ctx(op->defer);
    if (ok && op->rc == 0) {
        bus_cancel(op->srv->bus, op->id);
        bus_search_after(op->srv->bus, &op->after);
        char ev[256];
        snprintf(ev, sizeof(ev), "{\"job_id\":\"%s\",\"state\":\"cancelled\",\"reason\":\"cancelled\",\"source\":\"server\"}",
                 op->id);
        json_t *job = jobs_get_json(op->srv->db, op->id, NULL, false);
        const char *tenant = job ? json_string_value(json_object_get(job, "tenant")) : NULL;
        if (tenant) sse_publish(op->srv->sse, tenant, "job", ev);
        json_decref(job);
    }
    if (c) {
        if (!ok)
            http_error(c, GERR_INTERNAL, NULL, "database error");
        else if (op->rc == 2)
            http_error(c, GERR_NOT_FOUND, "id", "no job with this id");
        else if (op->rc == 1)
            http_error(c, GERR_CONFLICT, NULL, "the job has already finished");
        else {
            json_t *job = jobs_get_json(op->srv->db, op->id, NULL, true);
            models_public_job(job);
            http_reply_json(c, 200, job);
        }
    }
    http_defer_end(op->defer);
    search_after_clear(&op->after);
    free(op);
}

void api_job_cancel(http_ctx *c)
{
    cancel_op *op = xcalloc(1, sizeof(*op));
    snprintf(op->id, sizeof(op->id), "%s", http_param(c, 0));
    snprintf(op->tenant, sizeof(op->tenant), "%s", c->auth.tenant_id);
    snprintf(op->token_id, sizeof(op->token_id), "%s", c->auth.token_id);
    snprintf(op->who, sizeof(op->who), "token %s (%s)", c->auth.token_id, c->auth.token_name);
    op->scoped = scope(c) != NULL;
    op->srv = c->srv;
    search_after_init(&op->after);
    op->defer = http_defer_begin(c);
    store_submit(c->srv->store, apply_cancel, cancel_done, op);
}
