/* requeue.h - giving back the work of a worker that is gone.
 *
 * One Lua script, so it happens once and atomically: every task in the worker's
 * in-flight and task lists goes back to gantry:jobs with attempt + 1 (and a
 * "queued" event saying why), or, past the attempt limit, the job fails (a
 * "failed" event with the reason); then the lists and the registry entry are
 * deleted.  Called by the scheduler when a worker's heartbeat expired, and by a
 * worker that finds it was declared dead while it still runs (it stops first). */
#ifndef GANTRY_REQUEUE_H
#define GANTRY_REQUEUE_H

#include "common/redis_sync.h"

/* returns the number of tasks given back, -1 when Redis is unreachable */
int requeue_worker_tasks(rs_conn *r, const char *worker_id, int max_attempts, const char *why);

#endif
