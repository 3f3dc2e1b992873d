/* dispatch.h - putting one job on one worker, atomically (a Lua script):
 * claim the (job, attempt) so a job published twice runs once, LPUSH the task
 * to the worker's list, XADD the "scheduled" event, XACK the gantry:jobs entry.
 * Either all of it happens or none: a scheduler killed at any point loses nothing. */
#ifndef GANTRY_SCHED_DISPATCH_H
#define GANTRY_SCHED_DISPATCH_H

#include "common/redis_sync.h"
#include "scheduler/queue.h"

typedef enum { DISPATCH_OK, DISPATCH_DUPLICATE, DISPATCH_ERROR } dispatch_result;

dispatch_result dispatch_to(rs_conn *r, const sched_entry *e, const char *worker_id);
/* acknowledges an entry that will not run (cancelled before placement, undecodable) */
void dispatch_drop(rs_conn *r, const char *entry_id);

#endif
