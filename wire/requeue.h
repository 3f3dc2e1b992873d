/* requeue.h - giving a job's task back to gantry:jobs, at most once per attempt.
 *
 * Every path that requeues goes through one Lua function (wire/lua/requeue_one.lua),
 * so it happens atomically and once: it sets gantry:retry:<job>:<attempt> (SET NX) and only
 * the caller that set it puts the task back with attempt + 1 (and a "queued"
 * event saying why) or, past the attempt limit, fails the job (a "failed"
 * event).  The marker is what lets every member of a gang, the scheduler that
 * saw a member's heartbeat expire and a preempted member all try to requeue the
 * same job: the first one does, the rest do nothing.  A lost replica of an
 * inference job the autoscaler knows (gantry:infer:jobs) is not requeued: an
 * event says so and the autoscaler starts another replica, while the job's
 * other replicas keep serving; it keeps its generation, so its preemption key
 * (below) is deleted with it, or the next replica would stop at once.
 *
 * Callers: the scheduler when a worker's heartbeat expired, a worker that finds
 * it was declared dead (it stops first) or restarts, a preempted worker, and
 * the members of a gang that lost a peer.  The marker's value says why:
 * "requeued" (preemption, resize), "failure" (counted), "done" (finished). */
#ifndef GANTRY_REQUEUE_H
#define GANTRY_REQUEUE_H

#include "wire/redis_sync.h"

#include <stdint.h>

/* Every task in the worker's in-flight and task lists; then the lists and its
 * registry entry are deleted.  The lists are read first (the next attempt's task is
 * encoded in C) and the script acts only if they still hold the same tasks, else they
 * are read again.  Returns the number of tasks given back, -1 when Redis is
 * unreachable (or the lists kept changing). */
int requeue_worker_tasks(rs_conn *r, const char *worker_id, int max_attempts, const char *why);

/* One task (its raw JSON).  max_attempts 0: no limit (preemption does not count
 * as a failure).  Returns 1 when this call requeued (or failed) the job, 0 when that attempt
 * was already requeued or finished, -1 when Redis is unreachable. */
int requeue_task(rs_conn *r, const char *raw, int max_attempts, const char *why, const char *source, const char *worker_id);

/* Asks one generation of a job to stop and requeue itself: sets
 * gantry:preempt:<job>:<attempt> to `by` (the job that preempts it, or "resize"),
 * NX, expiring after an hour.  It names the generation and is not deleted when
 * the job is requeued: every member of a gang sees it, and a request meant for a
 * generation that has already ended cannot stop the next one.  1 when this call
 * set it, 0 when it was already set, -1 when Redis is unreachable. */
int requeue_ask(rs_conn *r, const char *job_id, int attempt, const char *by);

/* Marks the attempt as finished (the marker, set NX): a later requeue of it does
 * nothing.  A gang's reporting member calls it before publishing the result, and a
 * worker that fails a job over its tenant's limits before it stops (workers/main.c).
 * 1 when this call set it, 0 when the attempt was already requeued or finished, -1
 * when Redis is unreachable. */
int requeue_mark_done(rs_conn *r, const char *job_id, int attempt);

/* A job that moved on after a restart (a federated round completed past the checkpoint its generation
 * resumed from): its count of failed generations starts again, so that sites lost now and then over a long
 * run do not add up to a failure, while generations that cannot get past the point where the last one
 * stopped still fail the job at max_attempts.  1 when a count was cleared, 0 when there was none, -1 when
 * Redis is unreachable. */
int requeue_forgive(rs_conn *r, const char *job_id);

/* A site of a federated generation whose rounds go on without a lost site (docs/federated.md, "Dropouts"):
 * the worker running site `site` of the generation `attempt` says so, with the generation's threshold t
 * (gantry:fed:<job>:<attempt>:live).  When such a worker is lost (requeue_worker_tasks), the job is not
 * requeued while t sites remain without it: an event says which site was dropped, the worker leaves the
 * hash, and the other sites go on.  Site 0 (it reports the rounds) is never dropped so: its loss requeues
 * the generation as before.  0, or -1 when Redis is unreachable. */
int requeue_tolerate(rs_conn *r, const char *job_id, int attempt, const char *worker_id, int site, int threshold);
/* The sites of that generation still registered by requeue_tolerate (a lost one left): one bit per site index in
 * *sites (0 when the generation registered none).  0, or -1 when Redis is unreachable. */
int requeue_live_sites(rs_conn *r, const char *job_id, int attempt, uint64_t *sites);

#endif
