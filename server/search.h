/* search.h - the search controller (docs/search.md): a training job with spec.program and spec.search
 * is run by the server itself, never published to the scheduler.  Its trials are ordinary program
 * jobs of the same tenant (queued, scheduled under quota and fair share, requeued on a lost worker
 * like any job), each with spec.trial (its parameters: the worker puts them in the trial's
 * environment).  The controller reacts, inside the transaction that records them, to the search's
 * submission, every event of a trial's job (metrics points: asha's rule at the rungs; its end) and
 * cancels; what it decided is in SQLite (migrations/0009_search.sql), so a restarted server goes on
 * where it was.  What must follow the commit (publishing new trials, the Redis cancel keys of the
 * trials it stopped, the live events) is handed back in search_after, which the bus runs
 * (bus_search_after).  The algorithms are spec/search_algo.h. */
#ifndef GANTRY_SEARCH_H
#define GANTRY_SEARCH_H

#include <jansson.h>
#include <sqlite3.h>
#include <stdbool.h>

#include "server/jobs.h"

/* what to do once the transaction has committed */
typedef struct search_after {
    json_t *publish; /* job ids to publish (new trials) */
    json_t *cancel;  /* job ids whose cancel key to set (trials stopped or cancelled) */
    json_t *events;  /* [{"tenant", "job_id", "state", "reason"}] for the live event stream */
} search_after;

void search_after_init(search_after *a);
void search_after_clear(search_after *a);

/* whether a (valid) training spec is a search: a program with a search */
bool search_spec_is(const json_t *spec);

/* inside the submission's transaction, after jobs_insert of a search: the search starts (running, never
 * published) and its first trials are created.  0 or -1. */
int search_begin(sqlite3 *db, const char *job_id, search_after *after);

/* inside the events' transaction, after jobs_apply_event of e: a trial's metrics point or end.  0 or -1. */
int search_on_event(sqlite3 *db, const event_msg *e, apply_result res, search_after *after);

/* inside the cancel's transaction, after job_id was cancelled: a search cancels its live trials; a
 * trial cancelled by hand is counted cancelled and the search goes on.  0 or -1. */
int search_on_cancel(sqlite3 *db, const char *job_id, search_after *after);

/* GET /v1/jobs/{id}/trials: {"job_id","algorithm","metric","mode","resource","rungs":[..],"best":i|null,
 * "trials":[{"trial","job_id","jobs","params","state","failures","reason","last":{"value","resource"}|null,
 * "rungs":[{"rung","resource","value","continued","order"}]}]} ("order": the decisions' order across the
 * search, for checking asha's rule); NULL when job_id is not a search */
json_t *search_trials_json(sqlite3 *db, const char *job_id);

#endif
