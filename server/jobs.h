/* jobs.h - the jobs, job_events and job_metrics tables: every SQL statement about jobs lives here
 * (the cluster view's and /metrics' aggregates, the model registry's look-ups of a job too).
 * Functions that write run inside a store transaction (see store.h).  Below the registry
 * (models.h), which calls it; it calls no module above the database. */
#ifndef GANTRY_JOBS_H
#define GANTRY_JOBS_H

#include <jansson.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire/msg.h"

typedef struct {
    char id[48];
    char tenant_id[48];
    char type[16];
    char name[808]; /* 200 characters of up to 4 bytes */
    int priority;
    int slots;
    json_t *spec; /* borrowed */
    bool preemptible;
    const char *idem;              /* Idempotency-Key or NULL */
    unsigned char body_sha256[32]; /* of the canonical request body, bound to the key */
    char existing[48];             /* out: set when the key was already used (the earlier job's id) */
    int idem_mismatch;             /* out: the key was used with another body (nothing inserted) */
    int over_quota;                /* out: max_queued + 1 when the tenant is at it (nothing inserted) */
    bool no_queued_quota;          /* a search's trial: max_queued counts the search, not its trials */
} job_new;

/* inserts the job (state queued, unpublished) and its first event; 0 or -1 */
int jobs_insert(sqlite3 *db, job_new *j);

/* The job as API JSON; NULL when it does not exist or tenant_id (when not NULL) does not own it. */
json_t *jobs_get_json(sqlite3 *db, const char *id, const char *tenant_id, bool full);

typedef struct {
    const char *tenant_id; /* NULL: every tenant (admin) */
    const char *type, *state;
    int64_t cursor; /* 0: from the newest */
    int limit;
} job_filter;
/* {"jobs":[...],"next_cursor":..} */
json_t *jobs_list_json(sqlite3 *db, const job_filter *f);
/* {"events":[...]} oldest first */
json_t *jobs_events_json(sqlite3 *db, const char *job_id);
/* the highest rank a metrics point may name (a program job's ranks: spec/program_spec.h allows 64) */
#define METRICS_RANK_MAX 65535
/* {"job_id","rank","ranks":[ranks with points],"points":[{"ts":ms, ...metrics}]}: rank's points oldest first,
 * thinned evenly to max_points (the last kept) */
json_t *jobs_metrics_json(sqlite3 *db, const char *job_id, int rank, int max_points);
/* stores one progress point (once per event_id), as the rank its integer member "rank" names (0 without); 0 or -1 */
int jobs_add_metrics(sqlite3 *db, const char *job_id, const char *event_id, int64_t ts, const json_t *metrics);
/* the tenant's live inference job serving `model` (a running one first, then the newest):
 * {"id","state","spec"}, NULL when none */
json_t *jobs_serving(sqlite3 *db, const char *tenant_id, const char *model);
/* whether a replica of the inference job has loaded its model (a "replica ready" event: the worker
 * says so once the replica process answered its warm-up, workers/exec_infer.c) */
bool jobs_replica_loaded(sqlite3 *db, const char *job_id);

typedef enum { APPLY_DUPLICATE, APPLY_UNKNOWN_JOB, APPLY_RECORDED, APPLY_MOVED } apply_result;
/* Persists a stream event once (by event id) and moves the job when the transition is legal.
 * `tenant_out` (48 bytes) receives the job's tenant. -1 on a database error.  A job moved to
 * succeeded with a result is the caller's to register (models_register, in the same transaction:
 * bus.c). */
int jobs_apply_event(sqlite3 *db, const event_msg *e, apply_result *res, char *tenant_out);

/* Records a note on a job: an event without a state change (state ""), e.g. a model alias that
 * moved under a serving job.  0, or -1 on a database error. */
int jobs_note(sqlite3 *db, const char *job_id, const char *source, const char *reason);

/* A job's row for the search controller (server/search.c): {"id","tenant","name","priority":N,
 * "preemptible":bool,"state","spec":{..},"result"}; NULL when unknown or on a database error */
json_t *jobs_row(sqlite3 *db, const char *id);

/* Stops a live job as cancel does, with reason as its event (a search's trial stopped early): 0, 1
 * when it is already terminal or unknown, -1 on error.  The caller sets the Redis cancel key. */
int jobs_stop(sqlite3 *db, const char *id, const char *reason);

/* Cancels a live job: 0, 1 when it is already terminal, 2 when unknown/not owned, -1 on error. */
int jobs_cancel(sqlite3 *db, const char *id, const char *tenant_id, const char *who, char *event_id_out);

/* The cancel keys owed (migrations/0011_cancel_outbox.sql): every move to cancelled or failed (a cancel,
 * a search's stop, a worker's or the scheduler's failure) records its job in the same transaction; the bus
 * deletes the row once Redis has the key (jobs_cancel_key_set), and sets again, on every connect and in its
 * sweep, the keys of the rows older than before_ms (jobs_each_cancel_unset: fn for up to max of them,
 * oldest first; their number, or -1 on a database error). */
int jobs_cancel_key_set(sqlite3 *db, const char *id);
int jobs_each_cancel_unset(sqlite3 *db, int64_t before_ms, int max, void (*fn)(void *arg, const char *job_id), void *arg);

int jobs_mark_published(sqlite3 *db, const char *id);
/* every unfinished job goes back to the outbox (Redis lost its data) */
int jobs_mark_all_unpublished(sqlite3 *db);
/* Calls fn for up to `max` unpublished, unfinished jobs after seq `after` created before `before_ms`
 * (oldest first), each task with its tenant's current runtime and memory limits and roots; returns the last seq
 * seen (== after when there were none). */
typedef void (*jobs_task_fn)(void *arg, const task_msg *t);
int64_t jobs_each_unpublished(sqlite3 *db, int64_t after, int64_t before_ms, int max, jobs_task_fn fn, void *arg);
/* Calls fn with the task of job id as the outbox publishes it, whatever its published mark (a
 * search's new trial, published after its transaction); 0, 1 when it is unknown or finished.  A
 * search itself (server/search.h) is never published: it is neither here nor in the sweep. */
int jobs_task_of(sqlite3 *db, const char *id, jobs_task_fn fn, void *arg);

/* counts by type and state for /metrics: calls fn(type, state, n) */
void jobs_count_by_state(sqlite3 *db, void (*fn)(void *arg, const char *type, const char *state, long n), void *arg);

/* For the model registry (models.c): the tenant and the model name (spec.model_name, else the job's
 * name) of a job whose type registers models; tenant "" when it does not, when it is a search's trial
 * (spec.trial: its search registers; server/search.c) or unknown.  0, or -1 on a database error. */
int jobs_model_source(sqlite3 *db, const char *job_id, char *tenant, size_t tlen, char *name, size_t nlen);
/* the ids of the tenant's unfinished serving jobs whose spec.resolved is name@alias (a new array), NULL
 * on a database error */
json_t *jobs_serving_alias(sqlite3 *db, const char *tenant_id, const char *name, const char *alias);
/* inside a store write: the job's spec.resolved replaced by resolved; 0 or -1 */
int jobs_set_resolved(sqlite3 *db, const char *id, const json_t *resolved);

/* whether job_id is a job of tenant_id (an unknown job is not) */
bool jobs_of_tenant(sqlite3 *db, const char *job_id, const char *tenant_id);
/* a job's type and tenant: 0, 1 when unknown, -1 on a database error */
int jobs_type_and_tenant(sqlite3 *db, const char *job_id, char *type, size_t type_len, char *tenant, size_t tenant_len);
/* how many jobs the tenant has (0 on a database error) */
long long jobs_count_of_tenant(sqlite3 *db, const char *tenant_id);

/* the cluster view (GET /v1/cluster): per tenant (by name), its queued and running jobs, its weight
 * and slot quota (-1: none); the slots it uses now come from the worker registry (api_cluster.c) */
typedef struct {
    const char *id, *name;
    long long queued, running, max_slots;
    double weight;
} jobs_tenant_usage;
void jobs_usage_by_tenant(sqlite3 *db, void (*fn)(void *arg, const jobs_tenant_usage *u), void *arg);
/* /metrics: per tenant, the slots its scheduled and running jobs hold and its quota (-1: none) */
void jobs_slots_by_tenant(sqlite3 *db, void (*fn)(void *arg, const char *tenant, long long used, long long max_slots), void *arg);
/* the jobs queued, scheduled and running (resizing included); 0 or -1 */
int jobs_queue_counts(sqlite3 *db, long long *queued, long long *scheduled, long long *running);
/* the timeline (GET /v1/cluster/timeline): each job that finished since from (ms) or runs now on a worker,
 * oldest start first (at most 20,000); finished_at -1 while it runs.  0, or -1 on a database error. */
typedef struct {
    const char *worker, *type, *tenant_id, *id;
    int64_t started_at, finished_at;
} jobs_interval;
int jobs_each_interval(sqlite3 *db, int64_t from, void (*fn)(void *arg, const jobs_interval *iv), void *arg);

#endif
