/* dispatch.h - putting one job on its workers, atomically (a Lua script): claim
 * the (job, attempt) so a job published twice runs once, LPUSH the task to each
 * worker's list (all of a gang's workers at once), XADD the "scheduled" event,
 * XACK the gantry:jobs entry.  All of it happens or none: a scheduler killed at
 * any point loses nothing. */
#ifndef GANTRY_SCHED_DISPATCH_H
#define GANTRY_SCHED_DISPATCH_H

#include "common/redis_sync.h"
#include "scheduler/queue.h"

typedef enum { DISPATCH_OK, DISPATCH_DUPLICATE, DISPATCH_ERROR } dispatch_result;

dispatch_result dispatch_to(rs_conn *r, const sched_entry *e, const char *const *worker_ids, int n);
/* acknowledges an entry that will not run (cancelled before placement, undecodable) */
void dispatch_drop(rs_conn *r, const char *entry_id);
/* an event with no state change (why a job waits); 0 or -1 */
int dispatch_note(rs_conn *r, const char *job_id, const char *reason);

#endif
