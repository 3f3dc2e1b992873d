/* dispatch.h - putting one job on its workers, atomically (wire/lua/dispatch.lua): claim
 * the (job, attempt) so a job published twice runs once (and drop it if it was
 * cancelled meanwhile), LPUSH the task to each
 * worker's list (all of a gang's workers at once), XADD the "scheduled" event,
 * XACK the gantry:jobs entry.  All of it happens or none: a scheduler killed at
 * any point loses nothing. */
#ifndef GANTRY_SCHED_DISPATCH_H
#define GANTRY_SCHED_DISPATCH_H

#include "wire/redis_sync.h"
#include "scheduler/queue.h"

typedef enum { DISPATCH_OK, DISPATCH_DUPLICATE, DISPATCH_CANCELLED, DISPATCH_ERROR } dispatch_result;

/* Pipelined: dispatch_send queues the atomic step for one job (0, or -1 when Redis is
 * unreachable); dispatch_recv reads the replies in the same order. */
int dispatch_send(rs_conn *r, const sched_entry *e, const char *const *worker_ids, int n);
dispatch_result dispatch_recv(rs_conn *r, const char *job_id);
/* both at once */
dispatch_result dispatch_to(rs_conn *r, const sched_entry *e, const char *const *worker_ids, int n);
/* acknowledges an entry that will not run (cancelled before placement, undecodable) */
void dispatch_drop(rs_conn *r, const char *entry_id);
/* queues an event with no state change (why a job waits); read its reply with dispatch_note_recv */
int dispatch_note_send(rs_conn *r, const char *job_id, const char *reason);
int dispatch_note_recv(rs_conn *r);

#endif
